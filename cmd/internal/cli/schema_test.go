package cli

// The JSON schema that `redfence help json` documents, spelt out here on
// its own so that a change to the types that breaks it fails the test.
type listingSchema struct {
	Schema     int                      `json:"schema"`
	Complete   bool                     `json:"complete"`
	Skipped    []string                 `json:"skipped"`
	Truncated  bool                     `json:"truncated"`
	Locks      []lockSchema             `json:"locks"`
	Semaphores *[]listedSemaphoreSchema `json:"semaphores"` // nil: absent
	RWLocks    *[]listedRWLockSchema    `json:"rwlocks"`
}

type listedSemaphoreSchema struct {
	Key    string  `json:"key"`
	KeyHex *string `json:"key_hex"`
	semaphoreSchema
}

type listedRWLockSchema struct {
	Key    string  `json:"key"`
	KeyHex *string `json:"key_hex"`
	rwLockSchema
}

type rwLockSchema struct {
	Writer    *permitSchema  `json:"writer"`
	Readers   []permitSchema `json:"readers"`
	Waiting   int            `json:"writers_waiting"`
	LastWrite int64          `json:"last_write_token"`
}

type permitSchema struct {
	Owner     string       `json:"owner"`
	OwnerInfo *ownerSchema `json:"owner_info"`
	LeaseMs   float64      `json:"lease_ms"`
	Token     int64        `json:"token"`
}

type lockSchema struct {
	Key        string         `json:"key"`
	KeyHex     *string        `json:"key_hex"`
	RedisKey   string         `json:"redis_key"`
	State      string         `json:"state"`
	Token      int64          `json:"token"`
	Owner      string         `json:"owner"`
	OwnerInfo  *ownerSchema   `json:"owner_info"`
	Count      int            `json:"count"`
	AcquiredAt *string        `json:"acquired_at"`
	RenewedAt  *string        `json:"renewed_at"`
	HeldMs     *float64       `json:"held_ms"`
	LeaseMs    float64        `json:"lease_ms"`
	Waited     bool           `json:"waited"`
	Waiters    []waiterSchema `json:"waiters"`
	NoQueue    *string        `json:"no_queue"`
	ServerTime *string        `json:"server_time"`
}

type inspectSchema struct {
	Schema int `json:"schema"`
	lockSchema
	Forced []forcedSchema `json:"forced_releases"`
	Nodes  []struct {
		Node  int         `json:"node"`
		Addr  string      `json:"addr"`
		Error *string     `json:"error"`
		Lock  *lockSchema `json:"lock"`
	} `json:"nodes"`
	Semaphore *semaphoreSchema `json:"semaphore"`
	RWLock    *rwLockSchema    `json:"rwlock"`
	HeldAs    []string         `json:"held_as"`
}

type semaphoreSchema struct {
	Limit   int            `json:"limit"`
	Holders []permitSchema `json:"holders"`
}

type ownerSchema struct {
	Service string `json:"service"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Label   string `json:"label"`
}

type waiterSchema struct {
	Locker    string       `json:"locker"`
	OwnerInfo *ownerSchema `json:"owner_info"`
	Since     *string      `json:"since"`
	WaitedMs  float64      `json:"waited_ms"`
}

type forcedSchema struct {
	ID        string       `json:"id"`
	At        *string      `json:"at"`
	By        string       `json:"by"`
	Reason    string       `json:"reason"`
	Token     int64        `json:"token"`
	Floor     int64        `json:"floor"`
	Owner     string       `json:"owner"`
	OwnerInfo *ownerSchema `json:"owner_info"`
	Count     int          `json:"count"`
}
