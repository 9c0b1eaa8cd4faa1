// Hashes of byte strings: XXH3-64, through xxHash's own runtime dispatch.
//
// Why the dispatch: Debian builds libxxhash for baseline x86-64, so its plain XXH3_64bits runs the
// SSE2 loop. The same library exports XXH3_64bits_dispatch (xxh_x86dispatch.h), which picks its
// AVX2 or AVX-512 loop on the CPU at hand: over 1 MiB here, 11-15 GB/s plain against 39 GB/s
// dispatched. Every message of the simulator is hashed three times (the codec's checksum when
// sealed and when checked, the trace's digest of the payload), so a 1 MiB round trip spent three
// quarters of its time in the SSE2 loop.
//
// The _dispatch functions are in Debian's libxxhash.so, not in its libxxhash.a: a static link of
// dagsim would need the plain functions (nothing links it statically).
//
// Promise: the value is XXH3-64's, whichever loop computes it (xxHash specifies the value, not the
// loop; hash_test.cc checks it against the plain function and a published vector), so checksums on
// the wire, trace digests and everything replayed from a seed agree across machines.
#pragma once

#include <cstdint>
#include <span>

namespace dagsim {

uint64_t xxh3_64(std::span<const uint8_t> bytes);
uint64_t xxh3_64(std::span<const uint8_t> bytes, uint64_t seed);

}  // namespace dagsim
