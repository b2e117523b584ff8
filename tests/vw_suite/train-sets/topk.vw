3 'J-J|M J |F J
0 'J-M|M J |F M
2 'J-A|M J |F A

0 'M-J|M M |F J
3 'M-M|M M |F M
1 'M-A|M M |F A

2 'A-J|M A |F J
1 'A-M|M A |F M
3 'A-A|M A |F A

