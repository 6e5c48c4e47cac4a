#!/usr/bin/env -S bash --init-file '/srv/My Boxes/it\'s $HOME/venv/etc/rc'
echo /srv/My Boxes/it's $HOME
