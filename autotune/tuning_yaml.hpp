// The tuning cache's YAML: one GPU identity's file (schema-versioned) and the export bundle of
// all identities. Parsing is strict: anything unexpected is an Error naming the file and field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuning_key.hpp"

namespace flashjit::autotune {

// Bump when a field changes meaning or a required one is added; other schemas are unreadable.
constexpr int kTuningSchemaVersion = 1;
constexpr int kTuningExportVersion = 1;

std::string emit_tuning_file(const TuningFile& file);
// Throws Error(usage) "WHERE: ..." on bad YAML, a wrong schema or a malformed entry.
TuningFile parse_tuning_file(std::string_view text, std::string_view where);

// The `schema` a tuning file's text declares, or 0 when it is not YAML or has no integer schema:
// lets a reader tell a newer flashjit's file (leave it alone) from a corrupt one.
int tuning_file_schema(std::string_view text);

std::string emit_tuning_export(const std::vector<TuningFile>& files);
std::vector<TuningFile> parse_tuning_export(std::string_view text, std::string_view where);

}  // namespace flashjit::autotune
