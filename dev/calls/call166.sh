#!/bin/bash
# session 22, call 9 (run as one command line through the device tool): the characterization study again, on
# this session's scan plans (docs/bench/study; the last run was call32's, scan v36). Needs `dev/gpu.sh pack` and
# the default corpus (dev/default_corpus.sh) as data/default.tgz (tar czf data/default.tgz -C data default); carry
# .gpu/bin .gpu/lib data/default.tgz. Here afterwards: dev/bench/study.sh report <the folder that came back>.
tar xzf data/default.tgz -C data && PM_STUDY_LIMIT=300 bash dev/bench/study.sh run 2>&1 | tail -45
