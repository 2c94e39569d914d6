#!/bin/bash
# session 16, call 9: the final build (scan v52): README's whole end-to-end table with the op tests
# (dev/readme_table.sh), as call113 ran it
R=$OUT
bash dev/readme_table.sh
cd $R && tar czf all.tgz gpu && rm -rf gpu
