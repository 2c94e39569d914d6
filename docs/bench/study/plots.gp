# packmamba bench plots: run `gnuplot plots.gp` in this directory (PNG + SVG of each plot)

set title 'Training throughput vs sequence length'
set logscale x 2
set xlabel 'T (tokens per row)'
set ylabel 'tokens/s (real tokens)'
set yrange [0:*]
set grid
set key outside right
set format y '%.3s%c'
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output 'throughput.png'
plot 'throughput.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title "130m 16K tok/step fixed", 'throughput.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title "130m B=1 fixed", 'throughput.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title "130m B=2 fixed", 'throughput.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title "130m B=4 fixed", 'throughput.dat' index 4 using 1:2 with linespoints lw 2 pt 7 title "130m B=16 fixed", 'throughput.dat' index 5 using 1:2 with linespoints lw 2 pt 7 title "130m 64K tok/step fixed", 'throughput.dat' index 6 using 1:2 with linespoints lw 2 pt 7 title "130m B=8 single", 'throughput.dat' index 7 using 1:2 with linespoints lw 2 pt 7 title "130m B=8 pad", 'throughput.dat' index 8 using 1:2 with linespoints lw 2 pt 7 title "130m B=8 pack", 'throughput.dat' index 9 using 1:2 with linespoints lw 2 pt 7 title "370m 16K tok/step fixed", 'throughput.dat' index 10 using 1:2 with linespoints lw 2 pt 7 title "370m B=1 fixed", 'throughput.dat' index 11 using 1:2 with linespoints lw 2 pt 7 title "370m B=2 fixed", 'throughput.dat' index 12 using 1:2 with linespoints lw 2 pt 7 title "370m B=4 fixed", 'throughput.dat' index 13 using 1:2 with linespoints lw 2 pt 7 title "370m B=16 fixed", 'throughput.dat' index 14 using 1:2 with linespoints lw 2 pt 7 title "370m B=8 single", 'throughput.dat' index 15 using 1:2 with linespoints lw 2 pt 7 title "370m B=8 pad", 'throughput.dat' index 16 using 1:2 with linespoints lw 2 pt 7 title "370m B=8 pack", 'throughput.dat' index 17 using 1:2 with linespoints lw 2 pt 7 title "370m B=8 single data=default", 'throughput.dat' index 18 using 1:2 with linespoints lw 2 pt 7 title "370m B=8 pad data=default", 'throughput.dat' index 19 using 1:2 with linespoints lw 2 pt 7 title "370m B=8 pack data=default", 'throughput.dat' index 20 using 1:2 with linespoints lw 2 pt 7 title "L12-d768 B=8 fixed", 'throughput.dat' index 21 using 1:2 with linespoints lw 2 pt 7 title "L48-d768 B=8 fixed", 'throughput.dat' index 22 using 1:2 with linespoints lw 2 pt 7 title "1.4b B=4 fixed"
set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'
set output 'throughput.svg'
replot
unset output
reset

set title 'Where the step goes (forward + backward per op category)'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set ylabel '% of step time'
set yrange [0:105]
set xtics rotate by -40 left font ',8'
set key outside right
set grid ytics
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output 'breakdown.png'
plot 'breakdown.dat' using 2:xtic(1) title 'scan' lc rgb '#d62728', '' using 3 title 'conv' lc rgb '#ff7f0e', '' using 4 title 'in_proj' lc rgb '#1f77b4', '' using 5 title 'x_proj' lc rgb '#17becf', '' using 6 title 'dt_proj' lc rgb '#aec7e8', '' using 7 title 'out_proj' lc rgb '#2ca02c', '' using 8 title 'norm' lc rgb '#bcbd22', '' using 9 title 'classifier' lc rgb '#9467bd', '' using 10 title 'embedding' lc rgb '#8c564b', '' using 11 title 'optimizer' lc rgb '#e377c2', '' using 12 title 'recompute' lc rgb '#c5b0d5', '' using 13 title 'other' lc rgb '#7f7f7f'
set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'
set output 'breakdown.svg'
replot
unset output
reset

set title 'Peak memory vs sequence length, per model and batch'
set logscale x 2
set xlabel 'T (tokens per row)'
set ylabel 'GiB'
set yrange [0:*]
set grid
set key outside right
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output 'memory.png'
plot 'memory.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title "130m 16K tok/step", 'memory.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title "130m B=1", 'memory.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title "130m B=2", 'memory.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title "130m B=4", 'memory.dat' index 4 using 1:2 with linespoints lw 2 pt 7 title "130m B=16", 'memory.dat' index 5 using 1:2 with linespoints lw 2 pt 7 title "130m 64K tok/step", 'memory.dat' index 6 using 1:2 with linespoints lw 2 pt 7 title "130m B=8", 'memory.dat' index 7 using 1:2 with linespoints lw 2 pt 7 title "370m 16K tok/step", 'memory.dat' index 8 using 1:2 with linespoints lw 2 pt 7 title "370m B=1", 'memory.dat' index 9 using 1:2 with linespoints lw 2 pt 7 title "370m B=2", 'memory.dat' index 10 using 1:2 with linespoints lw 2 pt 7 title "370m B=4", 'memory.dat' index 11 using 1:2 with linespoints lw 2 pt 7 title "370m B=16", 'memory.dat' index 12 using 1:2 with linespoints lw 2 pt 7 title "370m B=8", 'memory.dat' index 13 using 1:2 with linespoints lw 2 pt 7 title "L12-d768 B=8", 'memory.dat' index 14 using 1:2 with linespoints lw 2 pt 7 title "L48-d768 B=8", 'memory.dat' index 15 using 1:2 with linespoints lw 2 pt 7 title "1.4b B=4"
set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'
set output 'memory.svg'
replot
unset output
reset

set title 'Memory by category'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set ylabel 'GiB'
set xtics rotate by -40 left font ',8'
set key outside right
set grid ytics
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output 'memory_breakdown.png'
plot 'memory_breakdown.dat' using 2:xtic(1) title 'parameters', '' using 3 title 'gradients', '' using 4 title 'optimizer', '' using 5 title 'activations', '' using 6 title 'workspace'
set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'
set output 'memory_breakdown.svg'
replot
unset output
reset

set title "370m T=4096 B=8 pack data=default"
set logscale xy
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'GFLOP/s'
set grid
set key outside right
set samples 400
BW = 4232.26
PEAK = 798227
roof(x) = x*BW < PEAK ? x*BW : PEAK
set xrange [0.0208243:103405]
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output 'roofline.png'
plot roof(x) with lines lw 2 lc rgb '#444444' title 'roofline (measured copy, GEMM)', 'roofline.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#d62728' title 'ops', '' using 1:2:3 with labels offset 0.8,0.6 left font ',8' notitle
set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'
set output 'roofline.svg'
replot
unset output
reset

set title 'Every op of every configuration'
set logscale xy
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'GFLOP/s'
set grid
set key outside right
set samples 400
BW = 4232.26
PEAK = 798227
roof(x) = x*BW < PEAK ? x*BW : PEAK
set xrange [0.0208243:103405]
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output 'roofline_all.png'
plot roof(x) with lines lw 2 lc rgb '#444444' title 'roofline', 'roofline_all.dat' using 1:($3==1 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#d62728' title 'scan', 'roofline_all.dat' using 1:($3==2 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#ff7f0e' title 'conv', 'roofline_all.dat' using 1:($3==3 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#1f77b4' title 'in_proj', 'roofline_all.dat' using 1:($3==4 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#17becf' title 'x_proj', 'roofline_all.dat' using 1:($3==5 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#aec7e8' title 'dt_proj', 'roofline_all.dat' using 1:($3==6 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#2ca02c' title 'out_proj', 'roofline_all.dat' using 1:($3==7 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#bcbd22' title 'norm', 'roofline_all.dat' using 1:($3==8 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#9467bd' title 'classifier', 'roofline_all.dat' using 1:($3==9 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#8c564b' title 'embedding', 'roofline_all.dat' using 1:($3==10 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#e377c2' title 'optimizer', 'roofline_all.dat' using 1:($3==11 ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '#c5b0d5' title 'recompute'
set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'
set output 'roofline_all.svg'
replot
unset output
reset

