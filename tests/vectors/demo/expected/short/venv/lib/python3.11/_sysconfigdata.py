build_time_vars = {'prefix': '/srv/box/venv'}
