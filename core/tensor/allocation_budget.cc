// The per-fiber allocation budget (allocation_budget.h).
#include "core/tensor/allocation_budget.h"

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/fiber_local.h"

namespace dagsim::allocation_budget {

namespace {

struct Open {
  Scope* innermost = nullptr;
};

FiberLocal<Open>& open_scopes() {
  static FiberLocal<Open> open;
  return open;
}

thread_local uint64_t allocated_on_thread = 0;

}  // namespace

Scope::Scope(std::string what, uint64_t bound) : what_(std::move(what)), bound_(bound) {
  Open& open = open_scopes().get();
  outer_ = open.innermost;
  open.innermost = this;
}

Scope::~Scope() {
  Open& open = open_scopes().get();
  // Scopes are RAII objects of one fiber's stack: they close in the order they opened.
  DAGSIM_ASSERT(open.innermost == this);
  open.innermost = outer_;
}

void charge(size_t nbytes) {
  Scope* innermost = open_scopes().get().innermost;
  // Check every enclosing scope before charging any, so a refused allocation leaves no trace.
  for (Scope* s = innermost; s != nullptr; s = s->outer_) {
    if (nbytes > s->bound_ - s->charged_) {
      throw errors::invalid_argument(s->what_ + ": it would allocate " + std::to_string(nbytes) + " bytes with " +
                                     std::to_string(s->charged_) + " already allocated, past the " +
                                     std::to_string(s->bound_) + " bytes one call may allocate");
    }
  }
  for (Scope* s = innermost; s != nullptr; s = s->outer_) s->charged_ += nbytes;
}

void count(size_t nbytes) { allocated_on_thread += nbytes; }

uint64_t allocated_bytes() { return allocated_on_thread; }

}  // namespace dagsim::allocation_budget
