#pragma once

#include <string>

#include "cli/options.h"
#include "validate/run_validation.h"
#include "validate/serving_validation.h"

namespace moelab::cli {

// validate --cases serving's own options: the scheduler's (as serve and sim serve), the request
// lengths and the request count. Given without --cases serving they are refused.
void AddValidateServingOptions(po::options_description& options,
                               validate::ServingValidationRequest& serving);
// Refuses the serving options when --cases serving was not given (naming the first one).
void RefuseServingOptionsElsewhere(const po::variables_map& values);

// Runs validate --cases serving with validate's shared options (`request`: model, shape, formats,
// quick, repeat, profile, seed, threads) and prints its report; --out DIR (new or empty) gets
// validation-serving.json, profile.json, fit.json and report.md, written only when it finished.
int ValidateServing(const validate::ValidationRequest& request, const po::variables_map& values,
                    validate::ServingValidationRequest& serving, const std::string& out,
                    bool quiet);

}  // namespace moelab::cli
