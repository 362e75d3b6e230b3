#pragma once

#include <string>

namespace moelab::routing {

// A --routing value parsed once into what it names, so every user (MakeRoutingSource, the
// simulator's calibration, the CLI) reads the same fields instead of re-parsing the text.
// Parsing opens no file (MakeRoutingSource loads tables and traces); a bare value is a trace
// path when it ends in ".json", contains '/', or names an existing file.
struct RoutingSpec {
  enum class Kind {
    kGate,        // "gate": the model's own router
    kUniform,     // "uniform"
    kPopularity,  // "popularity:FILE": a Fiddler popularity table (JSON or CSV)
    kCorrelated,  // "correlated[:locality=P,layer=P,popularity=FILE]"
    kTrace,       // "trace:FILE" or a bare trace path
  };
  Kind kind = Kind::kUniform;
  std::string text = "uniform";  // the value as given
  std::string file;              // kPopularity: the table; kTrace: the trace
  // kCorrelated (routing/correlated_routing.h): per-slot probabilities of reusing the previous
  // token's expert, in [0, 0.99], and of following the previous layer, in [0, 1]; fresh draws
  // from this table, or uniform when empty.
  double locality = 0;
  double layer_correlation = 0;
  std::string popularity_file;
};

// Error for anything else, naming the value and listing the valid forms; for correlated, naming
// the key (unknown key, missing '=', not a number, out of range, popularity without FILE).
RoutingSpec ParseRoutingSpec(const std::string& text);

}  // namespace moelab::routing
