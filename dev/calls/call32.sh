#!/bin/bash
# session 8, call 9: the characterization study (dev/bench/study.sh) with scan v36 and the side stream
tar xzf data/default.tgz -C data && PM_BIN=$PWD/.gpu/bin/packmamba bash dev/bench/study.sh run
