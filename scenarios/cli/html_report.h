// html_report: a run, or a `dagsim check` sweep, as one self-contained HTML page to open in a
// browser, as Jepsen's timeline.html is for its histories. A run's page: its verdict, a timeline
// of the nodes over time (html_timeline.h: each node a row with the rounds it was a member of,
// restarts, the workload's calls, the faults as marks, partitions as bands with their groups and
// the nodes they cut off not drawn as training, and a legend), the loss curve beside local
// training's with their difference step by step beside them, the rounds table (who left each, why
// and when), every check with its detail, and the story line by line. A sweep's page
// (html_sweep.cc): first its summary (sweep_digest.h: the pass rate, failures grouped by check and
// message, the slowest seeds, a histogram of run times), then every seed with its verdict and,
// for a failing one, why and the line that replays it.
//
// Promises: the page needs nothing at view time (no network, no script: inline SVG and CSS); every
// text from a run is escaped (junit.h's xml_escape), so a node name or a detail cannot inject
// markup; the same inputs give the same bytes. Elements carry ids and classes a test can find:
// #verdict, #timeline-chart (html_timeline.h lists its classes) with #timeline-legend, #loss-chart
// with .loss-dagsim and .loss-local, #loss-difference-chart with .loss-difference and
// #loss-difference-verdict, #rounds with td.left, #checks with .check.pass and .check.fail;
// #sweep-summary with #pass-rate, #failure-groups (tr.failure-group), #slowest (tr.slow) and
// #runtime-histogram (g.bin with data-passed and data-failed), then #seeds.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "scenarios/cli/sweep_summary.h"
#include "scenarios/run/runner.h"

namespace dagsim::cli {

// A run's page. `result` judged with ReportOptions::spans, so that it holds the workload's spans.
std::string run_report_html(const scenarios::Scenario& scenario, const std::string& file,
                            const scenarios::RunResult& result);

// A sweep's page, from `dagsim check --json`'s summary (read and type-checked by sweep_summary.h).
std::string sweep_report_html(const SweepSummary& summary);

}  // namespace dagsim::cli
