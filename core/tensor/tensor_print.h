// Printing a Tensor as PyTorch prints one: `std::cout << t` writes
//
//   tensor([[ 0.1000, -2.5000],
//           [ 3.0000,  4.0000]], shape=[2, 2], dtype=float64)
//
// with the shape and dtype always (PyTorch shows them only where they are not the default), the
// device off the cpu and requires_grad when set. Values share one format, chosen from those shown
// as PyTorch's _Formatter chooses: integral values as "3.", a wide range or tiny or huge values in
// scientific notation, otherwise fixed with `precision` decimals, all right-aligned to one width.
//
// Promises: the output is bounded. A tensor of more than `threshold` elements is summarised as
// PyTorch summarises it: each dimension longer than 2 x `edgeitems` shows its first and last
// `edgeitems` entries around "...", so at most (2 x edgeitems)^dim values are read and printed;
// nothing else of the tensor is read (on the cpu; a device tensor is copied to the host first).
// Tensor::to_string stays the exact, unbounded form (17 significant digits) that tests compare.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "core/tensor/tensor.h"

namespace dagsim {

// PyTorch's torch.set_printoptions defaults.
struct TensorPrintOptions {
  int precision = 4;         // decimals of the fixed and scientific forms
  int64_t threshold = 1000;  // more elements than this: summarised
  int64_t edgeitems = 3;     // entries shown at each end of a summarised dimension
};

// "tensor([1., 2.], shape=[2], dtype=float64)"; "tensor(undefined)" for an undefined tensor.
std::string format_tensor(const Tensor& t, const TensorPrintOptions& options = {});

// format_tensor with the default options.
std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace dagsim
