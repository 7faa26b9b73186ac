"""The `golem` command line (the model: Freqtrade's freqtrade/commands/). main.py builds the parser and runs a
command; each module holds one group of commands and adds them with register(command); common.py is what they
share. The CLI sits on top: it may import golem/, workers/, workflows/ and infra/; nothing below imports cli."""
