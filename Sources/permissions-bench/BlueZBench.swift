func runBlueZBench(_ arguments: [String]) { fatalError("not written yet") }
