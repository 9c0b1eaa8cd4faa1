// Which sanitizers this build runs under (scripts/sanitize.sh), for the few things that cannot
// work under them: AddressSanitizer reserves terabytes of address space for its shadow memory,
// so an address-space limit (RLIMIT_AS, what --max-memory sets) cannot be applied to a process
// built with it. Tests of such limits skip under it, as do the checks that need glibc's allocator
// to reuse freed memory (its quarantine never does at once); nothing else may depend on this.
#pragma once

namespace dagsim {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace dagsim
