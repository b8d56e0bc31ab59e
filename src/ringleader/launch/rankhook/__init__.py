"""Not imported as a package: ``sitecustomize.py`` here is loaded from ``PYTHONPATH``
by every armed rank (see ``ringleader.launch.teardown``)."""
