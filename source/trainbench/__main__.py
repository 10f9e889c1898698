from trainbench.cli.main import main

raise SystemExit(main())
