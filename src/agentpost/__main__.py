from agentpost.cli import main

main()
