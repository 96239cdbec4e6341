#include "dice_torch_cuda.h"
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/Exceptions.h>
