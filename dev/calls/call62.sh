#!/bin/bash
# session 11, call 7: README's headline rows again (the final build, a second call), for the call-to-call spread
R=$OUT; PM_TABLE=key bash dev/readme_table.sh
cd $R && tar czf all.tgz gpu && rm -rf gpu
