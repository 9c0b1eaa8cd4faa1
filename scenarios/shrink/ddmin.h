// Delta debugging (Zeller and Hildebrandt's ddmin) over the indices 0..n-1 of a list: the
// smallest subset it can find, in a bounded number of tests, on which `test` still holds.
//
// Promises:
//  - Deterministic: the subsets are tried in one fixed order (the empty set first, then chunks,
//    then complements, each in index order), so the same `test` gives the same answer.
//  - The result is 1-minimal when no stop came: removing any one more index makes `test` fail
//    (or `test` held on the empty set and the result is empty).
//  - `test` is never called on the full set (the caller knows it holds) nor twice on one subset.
//  - `stop()` is asked before each test; once it says true, ddmin returns the best set so far.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace dagsim::shrink {

// `test(subset)`: true when the property still holds with only `subset` (ascending indices) kept.
using SubsetTest = std::function<bool(const std::vector<size_t>& subset)>;

std::vector<size_t> ddmin(size_t n, const SubsetTest& test, const std::function<bool()>& stop);

}  // namespace dagsim::shrink
