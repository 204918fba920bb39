from launcher.cli.main import run

run()
