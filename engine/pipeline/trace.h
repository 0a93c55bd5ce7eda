// What one mini-batch of a pipeline did and when: every action's GPU time on its stage's
// device and host submit time, and every boundary transfer's host relay. Written as Chrome
// trace-event JSON (opens in Perfetto or chrome://tracing) and summarized as per-stage busy
// time and the measured bubble next to the schedule's (GPipe's: (K-1)/(M+K-1)).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/relay.h"

namespace brigade::pipeline {

struct ActionEvent {
  uint32_t stage = 0;
  std::string name;            // "F3", "R2", "B0", "S"
  double submit_us = 0;        // host, steady clock
  double begin_us = 0, end_us = 0;  // GPU timestamps mapped onto the host's steady clock
  // Host time spent recording the action's commands: from the start of the recording to its
  // submission, less the time blocked inside it (a link's free slot, the step's barrier).
  double record_us = 0;
  double record_cpu_us = 0;  // the same span's CPU time on the stage's thread (ExecutorOptions::cpu_times)
  uint32_t dispatches = 0, barriers = 0;
  bool replayed = false;  // the command buffer of the action's last run, submitted again (vk::Commands::set_replay)
};

struct TransferEvent {
  uint32_t from = 0, to = 0;   // stages
  Transfer transfer;
};

struct TraceSummary {
  uint32_t stages = 0, micro_batches = 0;
  double span_ms = 0;                 // first action's start to last action's end, all stages
  std::vector<double> busy_ms;        // per stage: sum of its actions' GPU time
  double bubble = 0;                  // 1 - mean busy / span
  double predicted_bubble = 0;        // the schedule's with equal cells (GPipe: (K-1)/(M+K-1))
  std::string schedule;               // its name
  uint64_t transfer_bytes = 0;        // bytes carried across stage boundaries
  uint64_t copied_bytes = 0;          // of which the host copied (staging links)
  double transfer_ms = 0;             // host time of the relays' copies and signals
  // Every action, the optimizer step's included: submissions, the dispatches and barriers
  // they hold, those that were replays, and the host time spent recording them.
  uint32_t submissions = 0, dispatches = 0, barriers = 0, replayed = 0;
  double record_ms = 0, record_cpu_ms = 0;
};

struct Trace {
  uint32_t stages = 0, micro_batches = 0;
  std::string schedule = "gpipe";
  double predicted_bubble = 0;  // simulated_bubble of the schedule
  std::vector<ActionEvent> actions;
  std::vector<TransferEvent> transfers;
  // Per stage, the rank that ran it, when the stages ran as ranks: each is then a process
  // of its own in the Chrome trace.
  std::vector<uint32_t> ranks;

  // The events of several processes' traces (each holding its own stages') as one.
  void merge(const Trace& other);
  std::string to_json() const;  // everything, to move between ranks
  static Trace from_json(const std::string& text);

  // Busy time and bubble over the forward and backward actions (the optimizer step, which
  // GPipe's bubble does not count, is left out).
  TraceSummary summary() const;
  // Chrome trace-event JSON: one track per stage for GPU actions, one per link for relays.
  std::string chrome_json() const;
};

// "stage 0: busy 12.3 ms (81%)" lines, the bubble and the transfers, for people.
std::string to_string(const TraceSummary& s);

}  // namespace brigade::pipeline
