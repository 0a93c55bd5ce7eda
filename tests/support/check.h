// Helpers shared by the kernel suites: random data, host <-> device vectors, tolerance
// comparison that reports the worst element, and finite-difference gradient checks.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "vk/buffer.h"
#include "vk/device.h"

namespace brigade::test {

// Deterministic uniform values in [lo, hi).
std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
std::vector<double> to_double(std::span<const float> v);
std::vector<float> to_float(std::span<const double> v);
// sum(a * b): the scalar loss of the finite-difference checks, sum(y * r) with fixed r.
double dot(std::span<const double> a, std::span<const double> b);

vk::Buffer to_device(vk::Device& dev, std::span<const float> data, const std::string& name,
                     vk::Category category = vk::Category::Activations);
vk::Buffer to_device(vk::Device& dev, std::span<const int32_t> data, const std::string& name,
                     vk::Category category = vk::Category::Activations);
vk::Buffer zeros(vk::Device& dev, size_t floats, const std::string& name,
                 vk::Category category = vk::Category::Activations);
std::vector<float> to_host(const vk::Buffer& buffer);

// The largest |v[i]|, 0 for none.
double max_abs(std::span<const float> v);

// Whether an error `err` is worse than the worst so far, a NaN worse than any number (and kept):
// std::max and `>` pass over a NaN, which leaves a worst error of 0 that every bound admits.
bool worse_error(double err, double worst);

// CHECKs |got - want| <= atol + rtol * |want| for every element; on failure reports how many
// differ, the largest difference and where, and the first values of both.
void check_close(std::span<const float> got, std::span<const float> want, double atol,
                 double rtol, const std::string& what);

// CHECKs an analytic gradient of a scalar function against central differences in double:
// |fd - grad| <= tol * max(1, |fd|) for every coordinate.
void check_gradient(const std::function<double(const std::vector<double>&)>& f,
                    std::vector<double> x, std::span<const double> grad, double eps, double tol,
                    const std::string& what);

}  // namespace brigade::test
