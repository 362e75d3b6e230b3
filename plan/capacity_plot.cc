// CapacityResult::GnuplotScript: plan capacity's plot (--plot-out).
#include <map>
#include <sstream>

#include "plan/capacity.h"
#include "report/format.h"

namespace moelab::plan {

std::string CapacityResult::GnuplotScript() const {
  // One named inline data block per hardware, and one of the Pareto front.
  std::map<std::string, std::ostringstream> by_hardware;
  std::ostringstream front;
  for (const CapacityRow& row : candidates) {
    if (!row.meets_slo) continue;
    by_hardware[row.hardware] << row.ttft_p99_s << " " << row.throughput_tokens_per_s_per_replica
                              << " \"b" << row.max_batch << " c" << row.chunk << " g" << row.gamma
                              << " x" << row.replicas << "\"\n";
    if (row.pareto)
      front << row.ttft_p99_s << " " << row.throughput_tokens_per_s_per_replica << "\n";
  }
  std::ostringstream gp;
  gp << "# moelab plan capacity: " << request.model << " at "
     << report::FormatNumber(request.rate_per_s, 3)
     << " requests/s, p99 TTFT <= " << report::FormatSeconds(request.slo_ttft_p99_s)
     << ", p99 TPOT <= " << report::FormatSeconds(request.slo_tpot_p99_s) << "\n"
     << "# Each point: a (max batch, chunk, gamma) setting at its fewest meeting replicas, "
        "labelled "
        "b<max batch> c<chunk> g<gamma> x<replicas>.\n";
  int index = 0;
  std::ostringstream plot;
  for (const auto& [hardware, data] : by_hardware) {
    gp << "$hardware" << index << " << EOD\n" << data.str() << "EOD\n";
    plot << (index == 0 ? "plot " : ", \\\n     ") << "$hardware" << index
         << " using 1:2 with points pointsize 1.5 title '" << hardware << "'";
    ++index;
  }
  gp << "$pareto << EOD\n" << front.str() << "EOD\n";
  gp << "set xlabel 'p99 TTFT (s)'\nset ylabel 'output tokens/s per replica'\n"
     << "set title 'plan capacity: throughput per replica vs p99 TTFT'\nset key outside right\n"
     << "set grid\n";
  if (index == 0) {
    gp << "set label 'no setting meets the objectives' at graph 0.5, 0.5 center\n"
       << "plot [0:1] [0:1] NaN notitle\n";
    return gp.str();
  }
  plot << ", \\\n     $pareto using 1:2 with linespoints pointtype 6 pointsize 2.5 title 'Pareto "
          "front'\n";
  gp << plot.str();
  return gp.str();
}

}  // namespace moelab::plan
