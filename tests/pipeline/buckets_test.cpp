// How a cell's gradients are grouped for the replicas' sum during the backward
// (pipeline/buckets.h): layers walked from the last, a bucket closed at its size, a tied
// parameter with its first holder (the last backward to add to it), every gradient once.
#include <doctest/doctest.h>

#include <map>

#include "model/model.h"
#include "pipeline/buckets.h"

namespace pipeline_buckets_test {

using namespace brigade;

namespace {

// Each trainable parameter's bucket index, checking that none is in two.
std::map<std::string, size_t> where(const std::vector<pipeline::Bucket>& buckets) {
  std::map<std::string, size_t> at;
  for (size_t b = 0; b < buckets.size(); ++b)
    for (const std::string& name : buckets[b].names) CHECK_MESSAGE(at.emplace(name, b).second, name, " twice");
  return at;
}

}  // namespace

TEST_CASE("buckets: one per layer when small, one for the cell when large, the tied embedding last") {
  // gpt-mini: embedding (wte, wpe), 4 blocks as 8 layers, the final norm, the head (wte again).
  const model::Model m = model::build("gpt-mini");
  const uint32_t L = uint32_t(m.layers.size());
  uint64_t trainable = 0;
  for (const model::ParamSpec& p : m.params()) trainable += p.kind == model::ParamKind::Trainable;

  const std::vector<pipeline::Bucket> each = pipeline::plan_buckets(m, 0, L, 1);
  const auto at = where(each);
  CHECK(at.size() == trainable);
  // Every layer with a parameter of its own closes a bucket, from the last; the head's only
  // parameter is the embedding's, so it closes none.
  std::vector<uint32_t> afters;
  for (const pipeline::Bucket& b : each) afters.push_back(b.after);
  CHECK(afters == std::vector<uint32_t>{L - 2, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(at.at("transformer.wte.weight") == each.size() - 1);
  CHECK(each.back().after == 0);

  const std::vector<pipeline::Bucket> one = pipeline::plan_buckets(m, 0, L, uint64_t(1) << 40);
  REQUIRE(one.size() == 1);
  CHECK(one[0].after == 0);
  CHECK(where(one).size() == trainable);

  // A cell of one block alone (layers 3-4, its attention and its MLP): two buckets of 64 KiB
  // at least, the last one closed at the cell's first layer whatever its size.
  const std::vector<pipeline::Bucket> mid = pipeline::plan_buckets(m, 3, 5, 64 << 10);
  REQUIRE(mid.size() == 2);
  CHECK(mid[0].after == 1);
  CHECK(mid[1].after == 0);
  CHECK(mid[0].names.front() == "transformer.h.1.ln_2.weight");
}

TEST_CASE("buckets: layers without parameters join the next bucket, and a cell without any has none") {
  // fashion-cnn: conv, relu, pool, conv, relu, pool, flatten, linear, relu, linear.
  const model::Model m = model::build("fashion-cnn");
  const std::vector<pipeline::Bucket> each = pipeline::plan_buckets(m, 0, uint32_t(m.layers.size()), 1);
  std::vector<uint32_t> afters;
  for (const pipeline::Bucket& b : each) afters.push_back(b.after);
  CHECK(afters == std::vector<uint32_t>{9, 7, 3, 0});
  CHECK(each[1].names == std::vector<std::string>{"7.weight", "7.bias"});
  CHECK(pipeline::plan_buckets(m, 4, 7, 1).empty());  // relu, pool, flatten
}

}  // namespace pipeline_buckets_test
