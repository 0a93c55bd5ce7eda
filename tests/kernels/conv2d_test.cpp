#include <doctest/doctest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "half_check.h"
#include "gpu.h"
#include "ops/conv2d.h"
#include "ops/launch_geometry.h"
#include "ops/conv2d_winograd.h"
#include "ref/conv2d.h"
#include "vk/commands.h"

namespace kernels_conv2d_test {

using namespace brigade;
using ops::Conv2dShape;

namespace {

// fp32 sums of at most a few hundred products of values in [-1, 1] against a double reference.
constexpr double kAtol = 2e-5, kRtol = 2e-5;
// Winograd's F(4x4, 3x3) scales the terms before they are summed by up to 10 (B^T's largest
// row, 4 + 5 + 1) and the sums after by up to 19 (A^T's), so its error can be two orders of
// magnitude over a direct sum's: up to 1.6e-4 measured on these shapes. A wrong coefficient
// or index is off by tenths or more.
constexpr double kWinogradAtol = 5e-4;

std::string describe(const Conv2dShape& s) {
  std::ostringstream o;
  o << "N" << s.n << " IC" << s.ic << " H" << s.h << " W" << s.w << " OC" << s.oc << " k" << s.kh
    << "x" << s.kw << " stride " << s.stride_h << "x" << s.stride_w << " pad " << s.pad_h << "x"
    << s.pad_w;
  return o.str();
}

// Odd sizes, strides 1 to 3, paddings 0 to 2, non-square kernels, widths below the stride,
// and the two fashion-cnn convolutions at a small batch.
const std::vector<Conv2dShape> kShapes = {
    {.n = 3, .ic = 2, .h = 7, .w = 9, .oc = 5, .kh = 3, .kw = 3, .pad_h = 1, .pad_w = 1},
    {.n = 2, .ic = 3, .h = 8, .w = 7, .oc = 4, .kh = 3, .kw = 3, .stride_h = 2, .stride_w = 2},
    {.n = 1, .ic = 2, .h = 5, .w = 6, .oc = 3, .kh = 2, .kw = 4, .pad_h = 2, .pad_w = 2},
    {.n = 2, .ic = 3, .h = 9, .w = 6, .oc = 7, .kh = 3, .kw = 1, .stride_h = 2, .pad_h = 1},
    {.n = 2, .ic = 2, .h = 6, .w = 11, .oc = 3, .kh = 4, .kw = 2, .stride_h = 3, .stride_w = 2,
     .pad_h = 1, .pad_w = 2},
    {.n = 1, .ic = 1, .h = 2, .w = 2, .oc = 2, .kh = 1, .kw = 1, .stride_h = 3, .stride_w = 3},
    {.n = 2, .ic = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .pad_h = 1, .pad_w = 1},
    {.n = 1, .ic = 32, .h = 14, .w = 14, .oc = 64, .kh = 3, .kw = 3, .pad_h = 1, .pad_w = 1},
    // 3x3 at stride 1 (Winograd's form): no padding and odd outputs (a half tile at the
    // right and bottom edges), padding 2, an output one row high, unequal paddings.
    {.n = 2, .ic = 3, .h = 7, .w = 9, .oc = 5, .kh = 3, .kw = 3},
    {.n = 1, .ic = 4, .h = 5, .w = 6, .oc = 3, .kh = 3, .kw = 3, .pad_h = 2, .pad_w = 2},
    {.n = 3, .ic = 2, .h = 1, .w = 2, .oc = 3, .kh = 3, .kw = 3, .pad_h = 1, .pad_w = 1},
    {.n = 2, .ic = 5, .h = 6, .w = 4, .oc = 6, .kh = 3, .kw = 3, .pad_h = 0, .pad_w = 2},
};

using ops::Form;
// Every form on every device, whichever the device runs by default; Winograd's on the
// shapes it takes (takes()).
constexpr Form kMethods[] = {Form::Matrix, Form::Winograd, Form::Direct};
std::string name(Form m) {
  return m == Form::Matrix ? " (matrix)" : m == Form::Winograd ? " (winograd)" : " (direct)";
}
bool takes(Form m, const Conv2dShape& s) { return m != Form::Winograd || ops::winograd::fits(s); }
// The absolute tolerance of a form whose other forms' is `atol`.
double atol_of(Form m, double atol) { return m == Form::Winograd ? kWinogradAtol : atol; }

// How many of kShapes Winograd's form takes: each test over them checks that many.
constexpr int kWinogradShapes = 7;

// Scratch for `chunk` samples at a time (0: all of them) in `form`. conv2d_scratch_floats
// holds Winograd's tiles only where that form pays, and may hold more samples' than a chunk's
// when the columns need more, so Winograd's form gets exactly its own.
vk::Buffer columns_for(vk::Device& dev, const Conv2dShape& s, uint32_t chunk, Form form = Form::Matrix) {
  const uint32_t samples = chunk ? chunk : s.n;
  const uint64_t floats = form == Form::Winograd ? ops::winograd::scratch_floats(s, samples)
                                                 : ops::conv2d_scratch_floats(s, samples);
  return test::zeros(dev, floats, "scratch", vk::Category::Scratch);
}

template <class T>
std::span<const T> in(const std::vector<T>& v) {
  return v;
}

struct Problem {
  Conv2dShape s;
  std::vector<float> x, weight, bias, dy;
  explicit Problem(const Conv2dShape& shape, uint32_t seed)
      : s(shape),
        x(test::random_vector(s.x_size(), seed)),
        weight(test::random_vector(s.weight_size(), seed + 1)),
        bias(test::random_vector(s.oc, seed + 2)),
        dy(test::random_vector(s.y_size(), seed + 3)) {}
};

std::vector<float> gpu_forward(vk::Device& dev, const Problem& p, bool with_bias, uint32_t chunk = 0,
                               Form method = Form::Matrix) {
  auto x = test::to_device(dev, p.x, "x"), w = test::to_device(dev, p.weight, "weight");
  auto b = test::to_device(dev, p.bias, "bias"), y = test::zeros(dev, p.s.y_size(), "y");
  auto columns = columns_for(dev, p.s, chunk, method);
  vk::Commands cmd(dev, "conv2d forward");
  ops::conv2d_forward(cmd, x, w, with_bias ? std::optional<vk::View>(b) : std::nullopt, y, p.s,
                      columns, method);
  cmd.run();
  return test::to_host(y);
}

std::vector<float> cpu_forward(const Problem& p, bool with_bias) {
  std::vector<double> y(p.s.y_size());
  const auto bias = test::to_double(p.bias);
  ref::conv2d_forward<double>(in(test::to_double(p.x)), in(test::to_double(p.weight)),
                              with_bias ? in(bias) : std::span<const double>(), y, p.s);
  return test::to_float(y);
}

// dx (pre-filled with `dx0`) after the GPU backward-data pass.
std::vector<float> gpu_backward_data(vk::Device& dev, const Problem& p,
                                     const std::vector<float>& dx0, uint32_t chunk = 0,
                                     Form method = Form::Matrix) {
  auto dy = test::to_device(dev, p.dy, "dy"), w = test::to_device(dev, p.weight, "weight");
  auto dx = test::to_device(dev, dx0, "dx");
  auto columns = columns_for(dev, p.s, chunk, method);
  vk::Commands cmd(dev, "conv2d backward-data");
  ops::conv2d_backward_data(cmd, dy, w, dx, p.s, columns, method);
  cmd.run();
  return test::to_host(dx);
}

std::vector<float> cpu_backward_data(const Problem& p, const std::vector<float>& dx0) {
  auto dx = test::to_double(dx0);
  ref::conv2d_backward_data<double>(in(test::to_double(p.dy)), in(test::to_double(p.weight)), dx,
                                    p.s);
  return test::to_float(dx);
}

struct WeightGrads {
  std::vector<float> dweight, dbias;
};

// Without a bias (with_bias false) dbias is returned as it started.
WeightGrads gpu_backward_weight(vk::Device& dev, const Problem& p, const WeightGrads& start,
                                uint32_t chunk = 0, bool with_bias = true,
                                Form method = Form::Matrix) {
  auto dy = test::to_device(dev, p.dy, "dy"), x = test::to_device(dev, p.x, "x");
  auto dw = test::to_device(dev, start.dweight, "dweight", vk::Category::Gradients);
  auto db = test::to_device(dev, start.dbias, "dbias", vk::Category::Gradients);
  auto columns = columns_for(dev, p.s, chunk, method);
  vk::Commands cmd(dev, "conv2d backward-weight");
  ops::conv2d_backward_weight(cmd, dy, x, dw, with_bias ? std::optional<vk::View>(db) : std::nullopt,
                              p.s, columns, method);
  cmd.run();
  return {test::to_host(dw), test::to_host(db)};
}

WeightGrads cpu_backward_weight(const Problem& p, const WeightGrads& start) {
  auto dw = test::to_double(start.dweight), db = test::to_double(start.dbias);
  ref::conv2d_backward_weight<double>(in(test::to_double(p.dy)), in(test::to_double(p.x)), dw, db,
                                      p.s);
  return {test::to_float(dw), test::to_float(db)};
}

WeightGrads nonzero_start(const Conv2dShape& s, uint32_t seed) {
  return {test::random_vector(s.weight_size(), seed, 1.0f, 2.0f),
          test::random_vector(s.oc, seed + 1, 1.0f, 2.0f)};
}

}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "conv2d forward matches the CPU reference with and without bias") {
  uint32_t seed = 10;
  int winograd = 0;
  for (const auto& s : kShapes) {
    const Problem p(s, seed += 10);
    winograd += takes(Form::Winograd, s);
    for (Form m : kMethods)
      for (bool with_bias : {true, false})
        if (takes(m, s))
          test::check_close(gpu_forward(device(), p, with_bias, 0, m), cpu_forward(p, with_bias),
                            atol_of(m, kAtol), kRtol,
                            "conv2d forward " + describe(s) + (with_bias ? " bias" : " no bias") + name(m));
  }
  CHECK(winograd == kWinogradShapes);
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d backward-data adds the input gradient to what dx held") {
  uint32_t seed = 100;
  for (const auto& s : kShapes) {
    const Problem p(s, seed += 10);
    const auto dx0 = test::random_vector(s.x_size(), seed + 7, 1.0f, 2.0f);
    for (Form m : kMethods)
      if (takes(m, s))
        test::check_close(gpu_backward_data(device(), p, dx0, 0, m), cpu_backward_data(p, dx0),
                          atol_of(m, kAtol), kRtol, "conv2d backward-data " + describe(s) + name(m));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d backward-weight adds weight and bias gradients to what they held") {
  uint32_t seed = 200;
  for (const auto& s : kShapes) {
    const Problem p(s, seed += 10);
    const auto start = nonzero_start(s, seed + 7);
    const auto cpu = cpu_backward_weight(p, start);
    for (Form m : kMethods) {
      if (!takes(m, s)) continue;
      const auto gpu = gpu_backward_weight(device(), p, start, 0, true, m);
      // The weight gradient sums N * OH * OW products: up to a few thousand in these shapes.
      test::check_close(gpu.dweight, cpu.dweight, atol_of(m, 1e-4), kRtol, "conv2d dweight " + describe(s) + name(m));
      test::check_close(gpu.dbias, cpu.dbias, 1e-4, kRtol, "conv2d dbias " + describe(s) + name(m));
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d backward-weight without a bias computes the weight gradient alone") {
  const Problem p(kShapes[8], 250);
  const auto start = nonzero_start(p.s, 251);
  for (Form m : kMethods) {
    const auto gpu = gpu_backward_weight(device(), p, start, 0, false, m);
    test::check_close(gpu.dweight, cpu_backward_weight(p, start).dweight, atol_of(m, 1e-4), kRtol,
                      "dweight" + name(m));
    CHECK(gpu.dbias == start.dbias);
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d results do not depend on how many samples the columns hold") {
  // Odd sizes (no vec4 loads), then fashion-cnn's second convolution, whose chunks start at
  // element offsets that are multiples of 4 (vec4 loads from an offset).
  for (const Conv2dShape& s :
       {Conv2dShape{.n = 5, .ic = 2, .h = 6, .w = 11, .oc = 3, .kh = 4, .kw = 2, .stride_h = 3,
                    .stride_w = 2, .pad_h = 1, .pad_w = 2},
        Conv2dShape{.n = 3, .ic = 32, .h = 14, .w = 14, .oc = 64, .kh = 3, .kw = 3, .pad_h = 1,
                    .pad_w = 1}}) {
    const Problem p(s, 300);
    const auto dx0 = test::random_vector(s.x_size(), 301, 1.0f, 2.0f);
    const auto start = nonzero_start(s, 302);
    const auto want_y = cpu_forward(p, true), want_dx = cpu_backward_data(p, dx0);
    const auto want_w = cpu_backward_weight(p, start);
    for (Form m : {Form::Matrix, Form::Winograd}) {
      if (!takes(m, s)) continue;
      for (uint32_t chunk : {1u, 2u, s.n}) {
        const std::string t = " " + describe(s) + ", chunks of " + std::to_string(chunk) + name(m);
        test::check_close(gpu_forward(device(), p, true, chunk, m), want_y, atol_of(m, kAtol), kRtol, "forward" + t);
        test::check_close(gpu_backward_data(device(), p, dx0, chunk, m), want_dx, atol_of(m, kAtol), kRtol,
                          "backward-data" + t);
        const auto got_w = gpu_backward_weight(device(), p, start, chunk, true, m);
        test::check_close(got_w.dweight, want_w.dweight, atol_of(m, 1e-4), kRtol, "dweight" + t);
        test::check_close(got_w.dbias, want_w.dbias, 1e-4, kRtol, "dbias" + t);
      }
    }
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d's Winograd passes in 2x2 and 4x4 tiles match the CPU reference") {
  // Every shape Winograd's form takes, in both tiles whichever tile_for picks, each pass with
  // scratch for one sample (chunks) and for all.
  uint32_t seed = 500;
  int shapes = 0;
  for (const auto& s : kShapes) {
    if (!ops::winograd::fits(s)) continue;
    ++shapes;
    const Problem p(s, seed += 10);
    const auto dx0 = test::random_vector(s.x_size(), seed + 7, 1.0f, 2.0f);
    const auto start = nonzero_start(s, seed + 8);
    const auto want_y = cpu_forward(p, true), want_dx = cpu_backward_data(p, dx0);
    const auto want_w = cpu_backward_weight(p, start);
    for (uint32_t tile : {2u, 4u})
      for (uint32_t chunk : {1u, s.n}) {
        const std::string what = describe(s) + ", F(" + std::to_string(tile) + "x" + std::to_string(tile) +
                                 ", 3x3), chunks of " + std::to_string(chunk);
        const double atol = tile == 2 ? kAtol : kWinogradAtol;
        auto x = test::to_device(device(), p.x, "x"), w = test::to_device(device(), p.weight, "weight");
        auto b = test::to_device(device(), p.bias, "bias"), dy = test::to_device(device(), p.dy, "dy");
        auto y = test::zeros(device(), s.y_size(), "y"), dx = test::to_device(device(), dx0, "dx");
        auto dw = test::to_device(device(), start.dweight, "dweight");
        auto scratch = test::zeros(device(), ops::winograd::scratch_floats(s, chunk, tile), "scratch",
                                   vk::Category::Scratch);
        vk::Commands cmd(device(), "conv2d winograd tiles");
        ops::winograd::forward(cmd, x, w, vk::View(b), y, s, scratch, {}, tile);
        ops::winograd::backward(cmd, dy, {dx, w, dw, x}, s, scratch, ops::Precision::Fp32, tile);
        cmd.run();
        test::check_close(test::to_host(y), want_y, atol, kRtol, "forward " + what);
        test::check_close(test::to_host(dx), want_dx, atol, kRtol, "backward-data " + what);
        test::check_close(test::to_host(dw), want_w.dweight, tile == 2 ? 1e-4 : kWinogradAtol, kRtol,
                          "dweight " + what);
      }
  }
  CHECK(shapes == kWinogradShapes);
}

// One sample's columns past one dispatch's 65535 workgroups of 64 (IC * OH * OW = 4,227,136,
// a 1x1 convolution of 64 channels of 257 x 257 at batch 1, an odd plane: one pixel an
// invocation): the columns' grid is capped and im2col and col2im walk the rest.
TEST_CASE_FIXTURE(test::Gpu, "conv2d's columns of one sample past 65535 workgroups match the CPU reference") {
  const Conv2dShape s{.n = 1, .ic = 64, .h = 257, .w = 257, .oc = 1, .kh = 1, .kw = 1};
  const Problem p(s, 700);
  const auto dx0 = test::random_vector(s.x_size(), 707, 1.0f, 2.0f);
  test::check_close(gpu_forward(device(), p, true), cpu_forward(p, true), kAtol, kRtol, "conv2d forward " + describe(s));
  test::check_close(gpu_backward_data(device(), p, dx0), cpu_backward_data(p, dx0), kAtol, kRtol,
                    "conv2d backward-data " + describe(s));
}

// The launchers' grids capped at 2 workgroups a dimension (ops::max_groups, as the
// 2-workgroup runs of the other kernels): im2col, col2im and Winograd's two filter passes
// (16 x 12 filters, 3 workgroups of 64) walk what the cap leaves out.
TEST_CASE_FIXTURE(test::Gpu, "conv2d's capped grids walk every column and filter") {
  struct Cap {
    uint32_t was = ops::max_groups();
    Cap() { ops::max_groups() = 2; }
    ~Cap() { ops::max_groups() = was; }
  } cap;
  const Conv2dShape s{.n = 2, .ic = 16, .h = 6, .w = 7, .oc = 12, .kh = 3, .kw = 3, .pad_h = 1, .pad_w = 1};
  const Problem p(s, 720);
  const auto dx0 = test::random_vector(s.x_size(), 727, 1.0f, 2.0f);
  const auto start = nonzero_start(s, 728);
  const auto cpu = cpu_backward_weight(p, start);
  for (Form m : {Form::Matrix, Form::Winograd}) {
    REQUIRE(takes(m, s));
    test::check_close(gpu_forward(device(), p, true, 0, m), cpu_forward(p, true), atol_of(m, kAtol), kRtol,
                      "conv2d forward " + describe(s) + name(m));
    test::check_close(gpu_backward_data(device(), p, dx0, 0, m), cpu_backward_data(p, dx0), atol_of(m, kAtol), kRtol,
                      "conv2d backward-data " + describe(s) + name(m));
    const auto gpu = gpu_backward_weight(device(), p, start, 0, true, m);
    test::check_close(gpu.dweight, cpu.dweight, atol_of(m, 1e-4), kRtol, "conv2d dweight " + describe(s) + name(m));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d refuses scratch that holds less than one sample") {
  // Each form's own need: the columns of a shape Winograd's form does not take, and
  // Winograd's transformed tiles.
  for (const auto& [form, shape] : {std::pair{Form::Matrix, kShapes[1]}, std::pair{Form::Winograd, kShapes[0]}}) {
    const Problem p(shape, 350);
    auto x = test::to_device(device(), p.x, "x"), w = test::to_device(device(), p.weight, "weight");
    auto y = test::zeros(device(), p.s.y_size(), "y");
    const uint64_t need = form == Form::Winograd ? ops::winograd::scratch_floats(p.s, 1) : ops::conv2d_scratch_floats(p.s, 1);
    auto columns = test::zeros(device(), need - 1, "scratch");
    vk::Commands cmd(device(), "conv2d small columns");
    CHECK_THROWS_WITH(ops::conv2d_forward(cmd, x, w, std::nullopt, y, p.s, columns, form),
                      doctest::Contains("holds less than one sample"));
  }
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d refuses Winograd's form for a shape it does not take") {
  const Problem p(kShapes[1], 360);  // stride 2
  auto x = test::to_device(device(), p.x, "x"), w = test::to_device(device(), p.weight, "weight");
  auto y = test::zeros(device(), p.s.y_size(), "y");
  auto scratch = columns_for(device(), p.s, 0);
  vk::Commands cmd(device(), "conv2d winograd refused");
  CHECK_THROWS_WITH(ops::conv2d_forward(cmd, x, w, std::nullopt, y, p.s, scratch, Form::Winograd),
                    doctest::Contains("3x3 kernels at stride 1"));
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d backward-weight is bit-identical from run to run") {
  const Problem p(kShapes[7], 400);
  const auto start = nonzero_start(p.s, 401);
  for (Form m : kMethods) {
    const auto a = gpu_backward_weight(device(), p, start, 0, true, m);
    const auto b = gpu_backward_weight(device(), p, start, 0, true, m);
    CHECK(a.dweight == b.dweight);
    CHECK(a.dbias == b.dbias);
  }
}

TEST_CASE("conv2d CPU backward matches finite differences of the forward") {
  for (const Conv2dShape& s :
       {Conv2dShape{.n = 2, .ic = 2, .h = 5, .w = 4, .oc = 3, .kh = 3, .kw = 2, .stride_h = 2,
                    .pad_h = 1},
        Conv2dShape{.n = 1, .ic = 3, .h = 4, .w = 5, .oc = 2, .kh = 2, .kw = 3, .stride_w = 2,
                    .pad_w = 2}}) {
    auto x = test::to_double(test::random_vector(s.x_size(), 1));
    auto w = test::to_double(test::random_vector(s.weight_size(), 2));
    auto b = test::to_double(test::random_vector(s.oc, 3));
    const auto r = test::to_double(test::random_vector(s.y_size(), 4));  // loss = sum(y * r)
    auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww,
                    const std::vector<double>& bb) {
      std::vector<double> y(s.y_size());
      ref::conv2d_forward<double>(in(xx), in(ww), in(bb), y, s);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * r[i];
      return l;
    };
    std::vector<double> dx(x.size()), dw(w.size()), db(b.size());
    ref::conv2d_backward_data<double>(in(r), in(w), dx, s);
    ref::conv2d_backward_weight<double>(in(r), in(x), dw, db, s);
    test::check_gradient([&](const auto& v) { return loss(v, w, b); }, x, dx, 1e-4, 1e-7,
                         "dx " + describe(s));
    test::check_gradient([&](const auto& v) { return loss(x, v, b); }, w, dw, 1e-4, 1e-7,
                         "dweight " + describe(s));
    test::check_gradient([&](const auto& v) { return loss(x, w, v); }, b, db, 1e-4, 1e-7,
                         "dbias " + describe(s));
  }
}

TEST_CASE("conv2d refuses a kernel larger than the padded input with one clear line") {
  const Conv2dShape s{.n = 1, .ic = 1, .h = 2, .w = 5, .oc = 1, .kh = 5, .kw = 3, .pad_h = 1};
  CHECK_THROWS_WITH_AS(ops::conv2d_validate(s),
                       doctest::Contains("kernel is larger than the padded input"), UserError);
  CHECK_THROWS_AS(ops::conv2d_validate(Conv2dShape{.stride_w = 0}), UserError);
}

TEST_CASE_FIXTURE(test::Gpu, "conv2d's two gradients at once are the bits of the two passes apart, in every form") {
  // Winograd's form shares dM between them; chunks of 2 samples where the shape has more.
  uint32_t seed = 4200, checked = 0;
  for (const Conv2dShape& s : kShapes)
    for (Form m : kMethods) {
      if (!takes(m, s)) continue;
      const Problem p(s, seed += 10);
      const WeightGrads start = nonzero_start(s, seed + 5);
      const auto dx0 = test::random_vector(s.x_size(), seed + 7);
      const WeightGrads apart = gpu_backward_weight(device(), p, start, 2, true, m);
      const std::vector<float> dx_apart = gpu_backward_data(device(), p, dx0, 2, m);
      auto dy = test::to_device(device(), p.dy, "dy"), x = test::to_device(device(), p.x, "x");
      auto w = test::to_device(device(), p.weight, "weight"), dx = test::to_device(device(), dx0, "dx");
      auto dw = test::to_device(device(), start.dweight, "dweight", vk::Category::Gradients);
      auto db = test::to_device(device(), start.dbias, "dbias", vk::Category::Gradients);
      auto columns = columns_for(device(), s, 2, m);
      vk::Commands cmd(device(), "conv2d backward");
      ops::conv2d_backward(cmd, dy, x, w, vk::View(dx), dw, vk::View(db), s, columns, m);
      cmd.run();
      const std::string what = std::string("shape ") + std::to_string(checked) + name(m);
      test::check_bits(test::to_host(dx), dx_apart, what + ": dx");
      test::check_bits(test::to_host(dw), apart.dweight, what + ": dweight");
      test::check_bits(test::to_host(db), apart.dbias, what + ": dbias");
      ++checked;
    }
  CHECK(checked >= kWinogradShapes);
}

}  // namespace kernels_conv2d_test
