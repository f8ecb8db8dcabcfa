package cql

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage"
)

func TestClusterConfigCarriesTheConnectionOptions(t *testing.T) {
	c, err := ClusterConfig(Options{
		Hosts: []string{"127.0.0.1:1"}, Consistency: gocql.One, Timeout: 3 * time.Second,
		Username: "u", Password: "p", TLS: &tls.Config{InsecureSkipVerify: true}, DisableInitialHostLookup: true,
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, c.Hosts)
	assert.Equal(t, gocql.One, c.Consistency)
	assert.Equal(t, DefaultSerial, c.SerialConsistency)
	assert.Equal(t, 3*time.Second, c.Timeout, "the default attempt, for DDL; a Store's statements carry their own")
	assert.IsType(t, healthPolicy{}, c.PoolConfig.HostSelectionPolicy)
	assert.IsType(t, healthObserver{}, c.QueryObserver)
	assert.IsType(t, healthObserver{}, c.BatchObserver)
	assert.Equal(t, DefaultConnectTimeout, c.ConnectTimeout)
	assert.Equal(t, DefaultReconnectInterval, c.ReconnectInterval, "a node marked down is retried every 5 s, not gocql's 60 s")
	assert.Equal(t, DefaultNumConns, c.NumConns)
	assert.True(t, c.DisableInitialHostLookup)
	assert.Equal(t, gocql.PasswordAuthenticator{Username: "u", Password: "p"}, c.Authenticator)
	require.NotNil(t, c.SslOpts)
	assert.False(t, c.SslOpts.EnableHostVerification)
	assert.IsType(t, slogAdapter{}, c.Logger)
	assert.Empty(t, c.Keyspace)
}

func TestClusterConfigWithoutHealthIsTheOldOne(t *testing.T) {
	c, err := ClusterConfig(Options{Hosts: []string{"127.0.0.1:1"}, Timeout: 3 * time.Second, DisableHealth: true})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, c.Timeout)
	assert.Nil(t, c.PoolConfig.HostSelectionPolicy, "gocql's default")
	assert.Nil(t, c.QueryObserver)
}

func TestConnectValidatesBeforeConnecting(t *testing.T) {
	_, err := Connect(context.Background(), Options{Password: "p", Consistency: gocql.Serial})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	for _, w := range []string{"no Hosts", "Password without Username", "Consistency"} {
		assert.Contains(t, err.Error(), w, "every problem at once")
	}
	assert.NotContains(t, err.Error(), "keyspace", "Connect needs no keyspace")
	_, err = ClusterConfig(Options{Session: &gocql.Session{}})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
}

func TestConnectUnreachableIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens.
	_, err := Connect(ctx, Options{Hosts: []string{"127.0.0.1:1"}, ConnectTimeout: time.Second, DisableInitialHostLookup: true})
	require.Error(t, err)
	assert.True(t, errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded), "%v", err)
}

func TestValidName(t *testing.T) {
	assert.True(t, ValidName("ks_1"))
	for _, bad := range []string{"", "1ks", "ks-1", "ks.t", "ks;DROP"} {
		assert.False(t, ValidName(bad), bad)
	}
}
