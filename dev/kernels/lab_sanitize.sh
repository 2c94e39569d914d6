#!/bin/bash
# lab_sanitize.sh LAB VERSION... — on the GPU machine: compute-sanitizer (SAN_TOOLS, default "memcheck racecheck")
# on a scan lab binary's correctness checks (`LAB small VERSION`: every staged kernel at the lab's checking shapes)
# for each version named; each run's log in $OUT/cs_TOOL_VERSION.log (a "+" in VERSION written as "_": the device
# tool does not bring back names with a "+"), one summary line printed per run. SAN_S: the time limit of each run
# (seconds, default 25).
R=${OUT:?set OUT}; lab=${1:?lab binary}; shift
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for v in "$@"; do
    for tool in ${SAN_TOOLS:-memcheck racecheck}; do
        log="$R/cs_${tool}_${v//+/_}.log"
        timeout "${SAN_S:-25}" "$CS" --tool "$tool" --print-limit 5 "$lab" small "$v" >"$log" 2>&1
        echo "== $tool $v rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|correctness' "$log" | paste -sd' ')"
    done
done
