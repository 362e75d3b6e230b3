# Sourced by scripts/fuzz.sh and scripts/fuzz-plateau.sh: the fuzz targets (fuzz/CMakeLists.txt),
# the sanitizers' settings and libFuzzer's limits every run of them uses.
# -rss_limit_mb / -malloc_limit_mb: a parser asking for more than 2 GB on any input is a finding.
fuzz_all_targets=(hf_config model_file hardware_file profile fit_file sd_measurements routing_trace
                  popularity safetensors_header safetensors_index int_list byte_size)
fuzz_limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
