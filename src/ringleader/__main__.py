from ringleader.cli.main import app

app(prog_name="ringleader")
