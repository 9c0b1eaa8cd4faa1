// html_timeline: a run's nodes over time as one inline SVG, the timeline of `dagsim report`'s run
// page (html_report.h).
//
// Each node is a row. On it: the workload's spans (the rounds it was a member of, in colours that
// alternate by round, restarts, backward passes and other calls), every fault that fired as a red
// mark across the rows, and every partition as a band from its start to its heal (or the run's
// end) with its groups tagged on their rows. A node the partition cut off is not drawn as training
// while it lasts: the part of its round inside the band is drawn hatched ("cut off"), not in the
// round's colour. A legend under the time axis names every kind of mark the chart drew.
//
// Which nodes a partition cuts off: for `groups`, every group but the largest (all of them when
// two groups tie for largest: each is cut off from another as large); for `from`/`to`, the `from`
// nodes, whose traffic is held. A guess from the fault alone, and it can be wrong: nodes in no
// group still reach every group (scenario.h), so a small group that can reach the store through
// them may go on training while drawn hatched. Deciding it right needs the run's store node and
// who reached it during the band, which the records do not yet say.
//
// A [job] run (workloads/job/job_records.h) draws each agent's row taller: its incarnations (.agent),
// the rounds it was a participant of, a lane per local rank for its worker processes (.worker),
// the restarts between its worker groups, and each fault that struck it from start to end
// (.struck); a row "store" after the agents' carries the store's faults.
//
// Promises: ids and classes a test can find: #timeline-chart, .node-row, .round, .restart,
// .backward, .call, .agent, .worker, .struck (each span with data-node), .fault, .partition (one per partition, data-groups
// naming its groups in full), .partition-group and .cut (data-node), #timeline-legend with
// .legend-item[data-kind] for each kind drawn. Every text from
// the run is escaped; the same result gives the same bytes.
#pragma once

#include <string>

#include "scenarios/run/runner.h"

namespace dagsim::cli {

std::string timeline_svg(const scenarios::Scenario& scenario, const scenarios::RunResult& result);

}  // namespace dagsim::cli
