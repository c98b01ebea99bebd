from evtime.cli import main

main()
