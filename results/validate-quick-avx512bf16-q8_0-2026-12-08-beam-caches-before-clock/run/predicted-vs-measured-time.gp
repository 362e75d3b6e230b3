set terminal pngcairo size 900,700
set output 'predicted-vs-measured-time.png'
set title 'moelab validate: predicted vs measured (seconds)'
set xlabel 'measured (seconds)'
set ylabel 'predicted (seconds)'
set key left top
set grid
set logscale xy
plot x title 'y = x' lw 1 lc rgb '#888888', 'predicted-vs-measured-time.dat' index 0 using 1:2:3:4 with xerrorbars title 'decode' pt 7, 'predicted-vs-measured-time.dat' index 1 using 1:2:3:4 with xerrorbars title 'prefill' pt 7, 'predicted-vs-measured-time.dat' index 2 using 1:2:3:4 with xerrorbars title 'beam' pt 7
set terminal svg size 900,700
set output 'predicted-vs-measured-time.svg'
set title 'moelab validate: predicted vs measured (seconds)'
set xlabel 'measured (seconds)'
set ylabel 'predicted (seconds)'
set key left top
set grid
set logscale xy
plot x title 'y = x' lw 1 lc rgb '#888888', 'predicted-vs-measured-time.dat' index 0 using 1:2:3:4 with xerrorbars title 'decode' pt 7, 'predicted-vs-measured-time.dat' index 1 using 1:2:3:4 with xerrorbars title 'prefill' pt 7, 'predicted-vs-measured-time.dat' index 2 using 1:2:3:4 with xerrorbars title 'beam' pt 7
