// AllocationBudget: a bound on the tensor bytes one piece of work may allocate, enforced where every
// tensor's bytes are taken (Storage's constructors), before they are taken.
//
// Why here and not in each function: a remote caller chooses the shapes a registered function
// computes with, and a zero-element argument ([2^14, 0]: no bytes on the wire) can still ask for a
// result of any size (linear of [2^14, 0] and [2^14, 0] is [2^14, 2^14]). A shape check written
// per function protects only the functions someone remembered to check; a budget checked at the
// allocation itself holds for every function, builtin or user, and every kernel it calls.
//
// Promises:
// - While a Scope is open on a fiber, every Storage that fiber constructs is charged to it (and to
//   every scope it is nested in) before any bytes are allocated; a charge that would take a scope
//   past its bound throws invalid_argument naming the scope's work, the bytes asked for and the
//   bound, and allocates nothing.
// - Per fiber (FiberLocal): a scope open on one fiber never charges another fiber's allocations,
//   so a call that waits on a nested RPC does not charge the fibers that run meanwhile.
// - The charge is cumulative (bytes allocated, not bytes live): a bound is on the work a call may
//   make this node do, which freeing early does not undo, and it needs no bookkeeping at free.
// - allocated_bytes() counts every Storage allocation on this OS thread whether or not a scope is
//   open: an independent measure for tests (it does not read the scopes' own accounting).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dagsim::allocation_budget {

class Scope {
 public:
  // `what` names the work in the error ("mlp_layer"); `bound` is in bytes.
  Scope(std::string what, uint64_t bound);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  uint64_t charged() const { return charged_; }
  uint64_t bound() const { return bound_; }

 private:
  friend void charge(size_t nbytes);

  std::string what_;
  uint64_t bound_;
  uint64_t charged_ = 0;
  Scope* outer_;
};

// Charges `nbytes` to this fiber's open scopes (Storage calls it before allocating), or throws
// invalid_argument and charges nothing.
void charge(size_t nbytes);

// Storage calls it after it took `nbytes`: counted for allocated_bytes(), apart from the scopes.
void count(size_t nbytes);
// Every byte Storage has allocated on this OS thread, scoped or not (for tests).
uint64_t allocated_bytes();

}  // namespace dagsim::allocation_budget
