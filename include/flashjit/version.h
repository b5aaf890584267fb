/* flashjit's version, for compile-time checks in C and C++ (fj_version() and flashjit::versions()
 * give the library's at run time). This file is the version's one source: CMakeLists.txt reads
 * project(VERSION), the SONAME and the package versions from these three lines. */
#ifndef FLASHJIT_VERSION_H
#define FLASHJIT_VERSION_H

#define FLASHJIT_VERSION_MAJOR 0
#define FLASHJIT_VERSION_MINOR 1
#define FLASHJIT_VERSION_PATCH 0

/* MAJOR * 10000 + MINOR * 100 + PATCH, e.g. `#if FLASHJIT_VERSION_NUMBER >= 100` for 0.1.0. */
#define FLASHJIT_VERSION_NUMBER (FLASHJIT_VERSION_MAJOR * 10000 + FLASHJIT_VERSION_MINOR * 100 + FLASHJIT_VERSION_PATCH)

#endif /* FLASHJIT_VERSION_H */
