#!/bin/bash
# session 16, call 6: the final build (scan v51): README's whole end-to-end table with the op tests
# (dev/readme_table.sh), as call81 ran it
R=$OUT
bash dev/readme_table.sh
cd $R && tar czf all.tgz gpu && rm -rf gpu
