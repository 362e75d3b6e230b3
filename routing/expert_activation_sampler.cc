#include "routing/expert_activation_sampler.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "base/error.h"
#include "base/hash.h"

namespace moelab::routing {
namespace {

int64_t WordsFor(int64_t num_experts) { return (num_experts + 63) / 64; }

model::PassKind KindOfStep(const std::string& kind) {
  if (kind == "prefill") return model::PassKind::kPrefill;
  if (kind == "verify") return model::PassKind::kVerify;
  return model::PassKind::kDecode;
}

// Appends token `token` of a step ([layer][token][k]) to `segment`'s bit sets.
void AppendToken(const std::vector<std::vector<std::vector<int32_t>>>& experts, size_t token,
                 int64_t words, SampledExpertActivation::Segment& segment) {
  const size_t base = segment.experts.size();
  segment.experts.resize(base + experts.size() * static_cast<size_t>(words), 0);
  for (size_t layer = 0; layer < experts.size(); ++layer) {
    uint64_t* bits = segment.experts.data() + base + layer * static_cast<size_t>(words);
    for (int32_t e : experts[layer][token]) bits[e / 64] |= uint64_t{1} << (e % 64);
  }
  ++segment.tokens;
}

}  // namespace

SampledExpertActivation::SampledExpertActivation(std::string description, int64_t num_layers,
                                                 int64_t num_experts, int64_t top_k,
                                                 std::vector<Segment> segments, uint64_t seed)
    : description_(std::move(description)),
      num_layers_(num_layers),
      num_experts_(num_experts),
      top_k_(top_k),
      words_(WordsFor(num_experts)),
      segments_(std::move(segments)),
      seed_(seed) {
  if (num_layers < 1 || top_k < 1 || top_k > num_experts) {
    throw base::Error(description_ + ": needs >= 1 layer and 1 <= top_k <= experts");
  }
  for (const Segment& segment : segments_) {
    if (segment.tokens < 1 ||
        segment.experts.size() != static_cast<size_t>(segment.tokens * num_layers_ * words_)) {
      throw base::Error(description_ +
                        ": a routed segment's bit sets do not match its tokens and layers");
    }
    pools_[segment.kind].push_back(&segment);
  }
  if (segments_.empty())
    throw base::Error(description_ + ": no routed tokens to measure expert activation on");
}

int64_t SampledExpertActivation::segments(model::PassKind kind) const {
  const auto it = pools_.find(kind);
  return it == pools_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

const std::vector<const SampledExpertActivation::Segment*>& SampledExpertActivation::Pool(
    model::PassKind kind) const {
  static const std::map<model::PassKind, std::vector<model::PassKind>> kPreference = {
      {model::PassKind::kDecode,
       {model::PassKind::kDecode, model::PassKind::kVerify, model::PassKind::kPrefill}},
      {model::PassKind::kVerify,
       {model::PassKind::kVerify, model::PassKind::kDecode, model::PassKind::kPrefill}},
      {model::PassKind::kPrefill,
       {model::PassKind::kPrefill, model::PassKind::kVerify, model::PassKind::kDecode}}};
  for (model::PassKind candidate : kPreference.at(kind)) {
    const auto it = pools_.find(candidate);
    if (it != pools_.end() && !it->second.empty()) return it->second;
  }
  throw base::Error(description_ +
                    ": no routed tokens");  // unreachable: the constructor refuses an empty set
}

const IndependentTokenDraws& SampledExpertActivation::SingleTokens(model::PassKind kind) const {
  const std::vector<const Segment*>& pool = Pool(kind);
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<IndependentTokenDraws>& draws = single_tokens_[&pool];
  if (draws) return *draws;
  const size_t per_segment = static_cast<size_t>(num_layers_ * num_experts_);
  const size_t layer_words = static_cast<size_t>(num_layers_ * words_);
  std::vector<int64_t> segment_tokens, routed_tokens(pool.size() * per_segment, 0);
  for (size_t s = 0; s < pool.size(); ++s) {
    const Segment& segment = *pool[s];
    segment_tokens.push_back(segment.tokens);
    int64_t* routed = routed_tokens.data() + s * per_segment;
    for (int64_t t = 0; t < segment.tokens; ++t) {
      const uint64_t* bits = segment.experts.data() + static_cast<size_t>(t) * layer_words;
      for (size_t w = 0; w < layer_words; ++w) {
        for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
          const int64_t layer = static_cast<int64_t>(w) / words_;
          const int64_t expert = (static_cast<int64_t>(w) % words_) * 64 + std::countr_zero(word);
          ++routed[layer * num_experts_ + expert];
        }
      }
    }
  }
  draws = std::make_unique<IndependentTokenDraws>(num_layers_, num_experts_, segment_tokens,
                                                  routed_tokens);
  return *draws;
}

double SampledExpertActivation::DistinctExperts(int64_t batch, int64_t tokens_per_sequence,
                                                model::PassKind kind) const {
  if (batch >= 1 && tokens_per_sequence == 1) {
    if (const std::optional<double> exact = SingleTokens(kind).DistinctExperts(batch))
      return *exact;
  }
  return Estimated(batch, tokens_per_sequence, kind).distinct;
}

model::ExpertLoad SampledExpertActivation::Load(int64_t batch, int64_t tokens_per_sequence,
                                                model::PassKind kind) const {
  if (tokens_per_sequence == 1) {
    const IndependentTokenDraws& draws = SingleTokens(kind);
    if (!draws.DrawsDifferentSegments(batch)) return draws.LoadWithReplacement(batch);
  }
  return Estimated(batch, tokens_per_sequence, kind).load;
}

const SampledExpertActivation::Estimate& SampledExpertActivation::Estimated(
    int64_t batch, int64_t tokens_per_sequence, model::PassKind kind) const {
  if (batch < 1 || tokens_per_sequence < 1) {
    throw base::Error("a pass has at least one sequence of one token, got " +
                      std::to_string(batch) + " x " + std::to_string(tokens_per_sequence));
  }
  const auto key = std::make_tuple(batch, tokens_per_sequence, kind);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
  }
  const std::vector<const Segment*>& pool = Pool(kind);
  std::vector<const Segment*> long_enough;
  int64_t longest = 0;
  for (const Segment* segment : pool) {
    longest = std::max(longest, segment->tokens);
    if (segment->tokens >= tokens_per_sequence) long_enough.push_back(segment);
  }
  // Pieces per sequence: one segment when some are long enough, else the longest ones joined.
  const int64_t piece_tokens = long_enough.empty() ? longest : tokens_per_sequence;
  if (long_enough.empty()) {
    for (const Segment* segment : pool) {
      if (segment->tokens == longest) long_enough.push_back(segment);
    }
  }
  const int64_t pieces = (tokens_per_sequence + piece_tokens - 1) / piece_tokens;
  const size_t layer_words = static_cast<size_t>(num_layers_ * words_);
  std::vector<int64_t> tokens_of(static_cast<size_t>(num_layers_ * num_experts_));
  std::vector<double> experts_with(static_cast<size_t>(batch * tokens_per_sequence) + 1);
  double total = 0;
  const uint64_t key_hash =
      base::Mix64(seed_ ^ base::Mix64(static_cast<uint64_t>(batch) * 1000003u +
                                      static_cast<uint64_t>(tokens_per_sequence) * 131u +
                                      static_cast<uint64_t>(kind)));
  // Every piece of the pass a different segment while the pool has enough (a partial
  // Fisher-Yates shuffle of the pool), else drawn with replacement.
  const bool distinct_draws = static_cast<int64_t>(long_enough.size()) >= batch * pieces;
  std::vector<size_t> order(long_enough.size());
  for (int sample = 0; sample < kSamples; ++sample) {
    std::fill(tokens_of.begin(), tokens_of.end(), 0);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    size_t drawn = 0;
    uint64_t state =
        base::Mix64(key_hash + static_cast<uint64_t>(sample) * base::kSplitMix64Golden);
    for (int64_t sequence = 0; sequence < batch; ++sequence) {
      int64_t remaining = tokens_per_sequence;
      for (int64_t piece = 0; piece < pieces; ++piece) {
        state = base::SplitMix64(state);
        size_t pick = state % long_enough.size();
        if (distinct_draws) {
          pick = drawn + state % (long_enough.size() - drawn);
          std::swap(order[drawn], order[pick]);
          pick = order[drawn++];
        }
        const Segment& segment = *long_enough[pick];
        const int64_t take = std::min(remaining, piece_tokens);
        state = base::SplitMix64(state);
        const int64_t offset =
            static_cast<int64_t>(state % static_cast<uint64_t>(segment.tokens - take + 1));
        remaining -= take;
        for (int64_t t = 0; t < take; ++t) {
          const uint64_t* bits =
              segment.experts.data() + static_cast<size_t>(offset + t) * layer_words;
          for (size_t w = 0; w < layer_words; ++w) {
            for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
              const int64_t layer = static_cast<int64_t>(w) / words_;
              const int64_t expert =
                  (static_cast<int64_t>(w) % words_) * 64 + std::countr_zero(word);
              ++tokens_of[static_cast<size_t>(layer * num_experts_ + expert)];
            }
          }
        }
      }
    }
    int64_t distinct = 0;  // (layer, expert) pairs that got a token
    for (int64_t count : tokens_of) {
      if (count == 0) continue;
      ++distinct;
      experts_with[static_cast<size_t>(count)] += 1.0;
    }
    total += static_cast<double>(distinct) / static_cast<double>(num_layers_);
  }
  Estimate estimate;
  estimate.distinct = total / kSamples;
  size_t first = 1, last = experts_with.size() - 1;
  while (first < last && experts_with[first] == 0) ++first;
  while (last > first && experts_with[last] == 0) --last;
  estimate.load.first_tokens = static_cast<int64_t>(first);
  const double draws = static_cast<double>(kSamples) * static_cast<double>(num_layers_);
  for (size_t t = first; t <= last; ++t) estimate.load.experts.push_back(experts_with[t] / draws);
  std::lock_guard<std::mutex> lock(mutex_);
  return memo_.emplace(key, std::move(estimate)).first->second;
}

std::unique_ptr<SampledExpertActivation> SampledExpertActivation::FromTrace(
    const RoutingTrace& trace, const std::string& origin, uint64_t seed) {
  trace.Validate(origin);
  const int64_t words = WordsFor(trace.num_experts);
  std::vector<Segment> segments;
  std::vector<size_t> open_streams;  // the segments the current run of decode steps appends to
  for (const RoutingStep& step : trace.steps) {
    if (step.tokens == 0) continue;
    const model::PassKind kind = KindOfStep(step.kind);
    std::vector<int64_t> sequences = step.sequence_tokens;
    if (sequences.empty()) {
      sequences.assign(kind == model::PassKind::kDecode ? static_cast<size_t>(step.tokens) : 1,
                       kind == model::PassKind::kDecode ? 1 : step.tokens);
    }
    const bool one_token_each =
        std::all_of(sequences.begin(), sequences.end(), [](int64_t n) { return n == 1; });
    const bool continues = kind == model::PassKind::kDecode && one_token_each &&
                           open_streams.size() == sequences.size();
    if (!continues) open_streams.clear();
    size_t token = 0;
    for (size_t s = 0; s < sequences.size(); ++s) {
      size_t index;
      if (continues) {
        index = open_streams[s];
      } else {
        index = segments.size();
        segments.push_back(Segment{kind, 0, {}});
        if (kind == model::PassKind::kDecode && one_token_each) open_streams.push_back(index);
      }
      for (int64_t t = 0; t < sequences[s]; ++t)
        AppendToken(step.experts, token++, words, segments[index]);
    }
  }
  if (segments.empty()) throw base::Error(origin + ": the routing trace has no routed tokens");
  return std::make_unique<SampledExpertActivation>("trace:" + origin, trace.num_layers,
                                                   trace.num_experts, trace.top_k,
                                                   std::move(segments), seed);
}

std::unique_ptr<SampledExpertActivation> SampledExpertActivation::FromSource(
    RoutingSource& source, const std::string& description, int64_t num_layers, int64_t num_experts,
    int64_t top_k, uint64_t seed, int64_t sequences, int64_t positions) {
  if (sequences < 1 || positions < 1)
    throw base::Error("a sampled activation needs >= 1 sequence and position");
  const int64_t words = WordsFor(num_experts);
  std::vector<Segment> segments(static_cast<size_t>(sequences),
                                Segment{model::PassKind::kDecode, 0, {}});
  std::vector<std::vector<std::vector<int32_t>>> step(static_cast<size_t>(num_layers));
  for (int64_t position = 0; position < positions; ++position) {
    for (int64_t layer = 0; layer < num_layers; ++layer)
      source.Route(position, layer, sequences, step[layer]);
    for (int64_t s = 0; s < sequences; ++s)
      AppendToken(step, static_cast<size_t>(s), words, segments[s]);
  }
  return std::make_unique<SampledExpertActivation>(description, num_layers, num_experts, top_k,
                                                   std::move(segments), seed);
}

std::unique_ptr<model::ExpertActivation> MakeExpertActivation(const RoutingSpec& spec,
                                                              int64_t num_layers,
                                                              int64_t num_experts, int64_t top_k,
                                                              uint64_t seed) {
  switch (spec.kind) {
    case RoutingSpec::Kind::kGate:
      throw base::Error(
          "--routing gate: a prediction has no gate to run; record the executor's routing with "
          "`moelab run "
          "--trace-out FILE` and pass --routing trace:FILE (or uniform, popularity:FILE, "
          "correlated:...)");
    case RoutingSpec::Kind::kUniform:
      return std::make_unique<model::UniformExpertActivation>(num_experts, top_k);
    case RoutingSpec::Kind::kTrace: {
      const RoutingTrace trace = LoadRoutingTrace(spec.file);
      if (trace.num_experts != num_experts || trace.top_k != top_k) {
        throw base::Error(spec.file + ": the trace routes " + std::to_string(trace.num_experts) +
                          " experts, top-" + std::to_string(trace.top_k) + "; the model has " +
                          std::to_string(num_experts) + " experts, top-" + std::to_string(top_k));
      }
      return SampledExpertActivation::FromTrace(trace, spec.file, seed);
    }
    case RoutingSpec::Kind::kPopularity:
    case RoutingSpec::Kind::kCorrelated: {
      const std::unique_ptr<RoutingSource> source =
          MakeRoutingSource(spec, num_layers, num_experts, top_k, seed);
      return SampledExpertActivation::FromSource(*source, spec.text, num_layers, num_experts, top_k,
                                                 seed);
    }
  }
  throw base::Error("unknown routing kind");
}

}  // namespace moelab::routing
