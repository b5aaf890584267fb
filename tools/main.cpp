// flashjit CLI entry: one CLI11 app with a subcommand per tools/cli_<name>.cpp; maps parse
// failures to exit 2, flashjit::Error kinds to the exit codes of exit_code_for, and a failed write
// to stdout to exit 1.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "support/printable.hpp"
#include "tools/cli.hpp"

namespace {

using namespace flashjit::cli;

const char* kFooter =
    "`flashjit <command> --help` describes each command. Exit codes: 0 ok, 1 failure, 2 usage or spec\n"
    "error, 69 no GPU or driver, 70 internal error.";

// "flashjit", "flashjit cache", "flashjit cache show": the deepest command the parser reached.
const CLI::App* deepest(const CLI::App& app) {
  const CLI::App* at = &app;
  for (std::vector<CLI::App*> subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands()) at = subs[0];
  return at;
}

std::string path_of(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* p = app->get_parent(); p; p = p->get_parent()) path = p->get_name() + " " + path;
  return path;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "-o,--output" → "-o/--output", for a comma-separated list of options.
std::string slashed(std::string names) {
  for (char& c : names)
    if (c == ',') c = '/';
  return names;
}

// What an argument nobody claimed is: an unknown command, an unknown option, or one word too many.
std::string extras_message(const CLI::App& at, const std::string& extra) {
  std::vector<std::string> commands, options;
  for (const CLI::App* s : at.get_subcommands({}))
    if (!s->get_group().empty()) commands.push_back(s->get_name());
  for (const CLI::Option* o : at.get_options())
    if (o->nonpositional()) options.push_back(slashed(o->get_name(false, true)));
  if (extra.size() > 1 && extra[0] == '-')
    return "unknown option '" + extra + "'; allowed: " + join_names(options);
  if (!commands.empty() && at.get_subcommands().empty())
    return "unknown command '" + extra + "'; commands: " + join_names(commands);
  return "unexpected argument '" + extra + "'";
}

int parse_failure(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  const CLI::App* at = deepest(app);
  const std::vector<std::string> extras = app.remaining(true);
  const bool extra = dynamic_cast<const CLI::ExtrasError*>(&e) && !extras.empty();
  std::cerr << path_of(at) << ": " << flashjit::printable(extra ? extras_message(*at, extras[0]) : std::string(e.what()))
            << "\n"
            << "Run '" << path_of(at) << " --help' for its usage.\n";
  return kUsage;
}

int run_command(const Command& c) {
  const std::string name = path_of(deepest(*c.app));
  try {
    flashjit::knobs();  // every FLASHJIT_* value checked by every command, not at its first use
    return c.run();
  } catch (const flashjit::Error& e) {
    const int code = exit_code_for(e);
    std::cerr << name << ": " << flashjit::printable(e.what()) << "\n";
    if (code == kNoGpu) std::cerr << name << ": nothing ran (exit 69: no GPU driver or device)\n";
    return code;
  } catch (const std::exception& e) {
    std::cerr << name << ": internal error: " << flashjit::printable(e.what())
              << "\nThis is a flashjit bug; please report it with the command line and FLASHJIT_LOG=debug output.\n";
    return kInternal;
  }
}

// A write error on stdout (a full disk, /dev/full) leaves ferror(3) set or fails the final
// fflush(3); nothing else reports it, so every command's exit goes through here and fails then.
// The errno text is known when the final flush is what failed (output under one stdio buffer).
int checked_stdout(int code) {
  errno = 0;
  std::cout.flush();  // std::cout is synced with stdio: this is fflush(stdout)
  const bool flushed = std::fflush(stdout) == 0;
  const int why = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return code;
  std::cerr << "flashjit: cannot write to standard output"
            << (why != 0 ? std::string(": ") + std::strerror(why) : std::string()) << "\n";
  return code == kOk ? kFailure : code;
}

int run_cli(int argc, char** argv) {
  CLI::App app("flashjit compiles FlashAttention kernels for a spec (YAML) at run time.", "flashjit");
  app.get_formatter()->label("Usage", "usage");
  app.get_formatter()->column_width(34);
  app.footer(kFooter);
  app.set_version_flag("--version", [] {
    const flashjit::VersionInfo v = flashjit::versions();
    return "flashjit " + v.flashjit + " (LLVM " + v.llvm + ", PTX " + v.ptx_isa + ")";
  });
  const std::vector<Command> commands = {add_info(app), add_check(app), add_compile(app),
                                         add_run(app),  add_tune(app),  add_cache(app)};
  CLI::App* help = app.add_subcommand("help", "")->group("");  // `flashjit help`, as `flashjit --help`
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_failure(app, e);
  }
  for (const Command& c : commands)
    if (c.app->parsed()) return run_command(c);
  std::cout << app.get_formatter()->make_help(&app, "flashjit", CLI::AppFormatMode::Normal);
  return help->parsed() ? kOk : kUsage;  // no command: the help, as a usage error
}

}  // namespace

int main(int argc, char** argv) { return checked_stdout(run_cli(argc, argv)); }
