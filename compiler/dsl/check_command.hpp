// `flashjit check`: parse and check a spec (or one expression) and print its canonical form.
#pragma once

#include <iosfwd>

namespace flashjit::dsl {

// argv[0] is the subcommand's own name ("check") and is ignored; the rest:
//   check SPEC... [--json]          canonical YAML of each spec (documents separated by
//                                   "---"), or with --json one JSON object per line
//   check --expr EXPR [--kind mask|score] [--param NAME:TYPE[=DEFAULT]]...
//                     [--tensor NAME:TYPE:DIM[,DIM...]]... [--json]
//                                   the canonical expression, then "# ..." analysis lines
//                                   (kv range of a mask, d/dscore of a score); the kind
//                                   defaults to score when EXPR mentions `score`, else mask
//   check --help
// Returns 0 when everything checked, 2 on any usage or spec error; every error goes to
// `err` as "file:line:col: message", the source line and a caret.
int run_check_command(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace flashjit::dsl
