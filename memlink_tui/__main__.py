from .launch import main

if __name__ == "__main__":  # worker processes re-import this module (spawn)
    raise SystemExit(main())
