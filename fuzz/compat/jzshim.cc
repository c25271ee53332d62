// Compatibility shim for @jazzer.js/fuzzer's prebuilt addon on glibc < 2.38 / libstdc++ < 13
// (Debian 12). The prebuild references three symbols that only newer runtimes define; each is
// provided here on top of what Debian 12 has. Built and placed beside the addon by
// scripts/jazzer-compat.mjs (see FUZZING.md); nothing else links it.
#include <cstdlib>
#include <ios>

// glibc 2.38 renamed the C23 strto* entry points (they also accept 0b prefixes, which the
// fuzzer's option parser never passes); the pre-C23 functions give the same results here.
extern "C" unsigned long __isoc23_strtoul(const char *s, char **end, int base) { return std::strtoul(s, end, base); }
extern "C" long __isoc23_strtol(const char *s, char **end, int base) { return std::strtol(s, end, base); }

// libstdc++ 13 moved iostream initialisation into this function; older libraries run it from
// every translation unit including <iostream>, so constructing one Init here is equivalent.
namespace std {
void ios_base_library_init() { static ios_base::Init init; }
}
