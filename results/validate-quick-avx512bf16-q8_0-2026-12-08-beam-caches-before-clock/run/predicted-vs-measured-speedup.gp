set terminal pngcairo size 900,700
set output 'predicted-vs-measured-speedup.png'
set title 'moelab validate: predicted vs measured (SD speedup)'
set xlabel 'measured (SD speedup)'
set ylabel 'predicted (SD speedup)'
set key left top
set grid
unset logscale
plot x title 'y = x' lw 1 lc rgb '#888888', 'predicted-vs-measured-speedup.dat' index 0 using 1:2:3:4 with xerrorbars title 'sd' pt 7
set terminal svg size 900,700
set output 'predicted-vs-measured-speedup.svg'
set title 'moelab validate: predicted vs measured (SD speedup)'
set xlabel 'measured (SD speedup)'
set ylabel 'predicted (SD speedup)'
set key left top
set grid
unset logscale
plot x title 'y = x' lw 1 lc rgb '#888888', 'predicted-vs-measured-speedup.dat' index 0 using 1:2:3:4 with xerrorbars title 'sd' pt 7
