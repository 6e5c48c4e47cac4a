build_time_vars = {'prefix': '/srv/My Boxes/it's $HOME/venv'}
