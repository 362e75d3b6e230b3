set terminal pngcairo size 900,700
set output 'sd-speedup-vs-batch.png'
set title 'SD speedup vs batch (alpha 0.80): predicted lines, measured points (min..max)'
set xlabel 'batch'
set ylabel 'speedup'
set logscale x 2
set grid
set key right top
plot 'sd-speedup-vs-batch.dat' index 0 using 1:2 with lines lc 1 title 'gamma 1 predicted', '' index 0 using 1:3:4:5 with yerrorbars lc 1 pt 7 title 'gamma 1 measured', 'sd-speedup-vs-batch.dat' index 1 using 1:2 with lines lc 2 title 'gamma 2 predicted', '' index 1 using 1:3:4:5 with yerrorbars lc 2 pt 7 title 'gamma 2 measured', 'sd-speedup-vs-batch.dat' index 2 using 1:2 with lines lc 3 title 'gamma 3 predicted', '' index 2 using 1:3:4:5 with yerrorbars lc 3 pt 7 title 'gamma 3 measured', 'sd-speedup-vs-batch.dat' index 3 using 1:2 with lines lc 4 title 'gamma 4 predicted', '' index 3 using 1:3:4:5 with yerrorbars lc 4 pt 7 title 'gamma 4 measured'
set terminal svg size 900,700
set output 'sd-speedup-vs-batch.svg'
set title 'SD speedup vs batch (alpha 0.80): predicted lines, measured points (min..max)'
set xlabel 'batch'
set ylabel 'speedup'
set logscale x 2
set grid
set key right top
plot 'sd-speedup-vs-batch.dat' index 0 using 1:2 with lines lc 1 title 'gamma 1 predicted', '' index 0 using 1:3:4:5 with yerrorbars lc 1 pt 7 title 'gamma 1 measured', 'sd-speedup-vs-batch.dat' index 1 using 1:2 with lines lc 2 title 'gamma 2 predicted', '' index 1 using 1:3:4:5 with yerrorbars lc 2 pt 7 title 'gamma 2 measured', 'sd-speedup-vs-batch.dat' index 2 using 1:2 with lines lc 3 title 'gamma 3 predicted', '' index 2 using 1:3:4:5 with yerrorbars lc 3 pt 7 title 'gamma 3 measured', 'sd-speedup-vs-batch.dat' index 3 using 1:2 with lines lc 4 title 'gamma 4 predicted', '' index 3 using 1:3:4:5 with yerrorbars lc 4 pt 7 title 'gamma 4 measured'
