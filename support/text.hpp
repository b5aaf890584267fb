// Small string and file helpers shared by the compiler and the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashjit {

std::vector<std::string> split(std::string_view s, char sep);
std::string trim(std::string_view s);
std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
void make_dirs(const std::string& path);

}  // namespace flashjit
