from ci_evals.cli.app import main

raise SystemExit(main())
