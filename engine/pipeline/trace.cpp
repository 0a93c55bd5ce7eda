#include "pipeline/trace.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "util/units.h"

namespace brigade::pipeline {

namespace {

bool counts_for_bubble(const ActionEvent& a) { return a.name != "S"; }

}  // namespace

TraceSummary Trace::summary() const {
  TraceSummary s;
  s.stages = stages, s.micro_batches = micro_batches;
  s.busy_ms.assign(stages, 0.0);
  double first = std::numeric_limits<double>::max(), last = std::numeric_limits<double>::lowest();
  for (const ActionEvent& a : actions) {
    ++s.submissions, s.dispatches += a.dispatches, s.barriers += a.barriers, s.replayed += a.replayed;
    s.record_ms += a.record_us / 1000.0, s.record_cpu_ms += a.record_cpu_us / 1000.0;
    if (!counts_for_bubble(a) || a.stage >= stages) continue;
    first = std::min(first, a.begin_us), last = std::max(last, a.end_us);
    s.busy_ms[a.stage] += (a.end_us - a.begin_us) / 1000.0;
  }
  s.span_ms = last > first ? (last - first) / 1000.0 : 0.0;
  double busy = 0;
  for (double b : s.busy_ms) busy += b;
  if (s.span_ms > 0 && stages > 0) s.bubble = std::max(0.0, 1.0 - busy / stages / s.span_ms);
  s.predicted_bubble = predicted_bubble;
  s.schedule = schedule;
  for (const TransferEvent& t : transfers) {
    s.transfer_bytes += t.transfer.shared_bytes;
    s.copied_bytes += t.transfer.bytes;
    s.transfer_ms += (t.transfer.end_us - t.transfer.begin_us) / 1000.0;
  }
  return s;
}

std::string Trace::chrome_json() const {
  double origin = std::numeric_limits<double>::max();
  for (const ActionEvent& a : actions) origin = std::min({origin, a.begin_us, a.submit_us});
  for (const TransferEvent& t : transfers) origin = std::min(origin, t.transfer.ready_us);
  if (origin == std::numeric_limits<double>::max()) origin = 0;
  nlohmann::json events = nlohmann::json::array();
  auto pid = [&](uint32_t stage) { return ranks.empty() ? 1u : ranks.at(stage) + 1; };
  auto name_track = [&](uint32_t stage, uint32_t tid, const std::string& name) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid(stage)}, {"tid", tid},
                      {"args", {{"name", name}}}});
  };
  for (uint32_t k = 0; k < ranks.size(); ++k)
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid(k)},
                      {"args", {{"name", "rank " + std::to_string(ranks[k])}}}});
  for (uint32_t k = 0; k < stages; ++k) name_track(k, k, "stage " + std::to_string(k));
  for (uint32_t k = 0; k + 1 < stages; ++k)
    name_track(k, 100 + k, "link " + std::to_string(k) + "<->" + std::to_string(k + 1));
  for (const ActionEvent& a : actions)
    events.push_back({{"ph", "X"}, {"name", a.name}, {"cat", "gpu"}, {"pid", pid(a.stage)}, {"tid", a.stage},
                      {"ts", a.begin_us - origin}, {"dur", a.end_us - a.begin_us},
                      {"args", {{"submitted_us", a.submit_us - origin}, {"record_us", a.record_us},
                                {"record_cpu_us", a.record_cpu_us},
                                {"dispatches", a.dispatches}, {"barriers", a.barriers},
                                {"replayed", a.replayed}}}});
  for (const TransferEvent& t : transfers) {
    const uint32_t tid = 100 + std::min(t.from, t.to);
    events.push_back({{"ph", "X"}, {"name", t.transfer.name}, {"cat", "relay"}, {"pid", pid(t.from)},
                      {"tid", tid}, {"ts", t.transfer.begin_us - origin},
                      {"dur", t.transfer.end_us - t.transfer.begin_us},
                      {"args", {{"from", t.from}, {"to", t.to}, {"bytes", t.transfer.shared_bytes},
                                {"copied_bytes", t.transfer.bytes},
                                {"waited_us", t.transfer.begin_us - t.transfer.ready_us}}}});
  }
  return nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump(1);
}

void Trace::merge(const Trace& other) {
  actions.insert(actions.end(), other.actions.begin(), other.actions.end());
  transfers.insert(transfers.end(), other.transfers.begin(), other.transfers.end());
}

std::string Trace::to_json() const {
  nlohmann::json a = nlohmann::json::array(), t = nlohmann::json::array();
  for (const ActionEvent& e : actions)
    a.push_back({e.stage, e.name, e.submit_us, e.begin_us, e.end_us, e.record_us, e.record_cpu_us, e.dispatches, e.barriers,
                 e.replayed});
  for (const TransferEvent& e : transfers)
    t.push_back({e.from, e.to, e.transfer.name, e.transfer.bytes, e.transfer.shared_bytes, e.transfer.ready_us,
                 e.transfer.begin_us, e.transfer.end_us});
  return nlohmann::json{{"stages", stages}, {"micro_batches", micro_batches}, {"schedule", schedule},
                        {"predicted_bubble", predicted_bubble}, {"actions", a}, {"transfers", t}, {"ranks", ranks}}
      .dump();
}

Trace Trace::from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  Trace tr;
  j.at("stages").get_to(tr.stages), j.at("micro_batches").get_to(tr.micro_batches);
  j.at("schedule").get_to(tr.schedule), j.at("predicted_bubble").get_to(tr.predicted_bubble);
  j.at("ranks").get_to(tr.ranks);
  for (const nlohmann::json& e : j.at("actions"))
    tr.actions.push_back({e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8], e[9]});
  for (const nlohmann::json& e : j.at("transfers"))
    tr.transfers.push_back({e[0], e[1], Transfer{e[2], e[3], e[4], e[5], e[6], e[7]}});
  return tr;
}

std::string to_string(const TraceSummary& s) {
  std::string out;
  char line[160];
  for (uint32_t k = 0; k < s.busy_ms.size(); ++k) {
    std::snprintf(line, sizeof line, "stage %u: busy %.2f ms of %.2f ms (%.0f%%)\n", k, s.busy_ms[k],
                  s.span_ms, s.span_ms > 0 ? 100.0 * s.busy_ms[k] / s.span_ms : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "bubble: measured %.3f, %s schedule %.3f (K=%u, M=%u)\n", s.bubble,
                s.schedule.c_str(), s.predicted_bubble, s.stages, s.micro_batches);
  out += line;
  std::snprintf(line, sizeof line, "transfers: %s across boundaries (%s copied by the host), relays %.2f ms\n",
                format_bytes(s.transfer_bytes).c_str(), format_bytes(s.copied_bytes).c_str(),
                s.transfer_ms);
  out += line;
  return out;
}

}  // namespace brigade::pipeline
