import sys

from phaseaware.cli.main import main

sys.exit(main())
