#!/bin/bash
# session 13, call 5: the final build (the layer pairs' weight gradients): README's whole end-to-end table with the
# op tests (dev/readme_table.sh)
R=$OUT
bash dev/readme_table.sh
cd $R && tar czf all.tgz gpu && rm -rf gpu
