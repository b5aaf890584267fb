// Writing JSON with llvm::json::OStream (llvm/Support/JSON.h): compact text, strings escaped and
// checked for UTF-8 by LLVM.
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <string>

namespace flashjit {

// `v`, or null for NaN and infinities, which JSON cannot represent (RFC 8259 §6).
inline llvm::json::Value number_or_null(double v) {
  return std::isfinite(v) ? llvm::json::Value(v) : llvm::json::Value(nullptr);
}

// The text of the one JSON value that `write` writes.
inline std::string json_document(llvm::function_ref<void(llvm::json::OStream&)> write) {
  std::string text;
  llvm::raw_string_ostream os(text);  // unbuffered: `text` is complete when `write` returns
  llvm::json::OStream json(os);
  write(json);
  return text;
}

}  // namespace flashjit
